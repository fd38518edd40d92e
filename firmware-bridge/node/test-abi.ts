/**
 * A host ABI for Node: a settable clock, node:crypto randomness, any ByteStorage, and a log that
 * keeps its lines (tests read them). What a firmware supplies on a device.
 */
import { randomBytes } from 'node:crypto';
import type { ByteStorage, HostAbi, LogLevel } from '../abi.js';
import { createMemoryByteStorage } from '../abi.js';

export interface NodeAbi extends HostAbi {
  lines: Array<[LogLevel, string]>;
  setNow(ms: number): void;
}

/** @example const abi = createNodeAbi({ now: Date.parse('2026-11-22T10:00:00Z') }) */
export function createNodeAbi(o: { now?: number; storage?: ByteStorage } = {}): NodeAbi {
  let t = o.now ?? Date.now();
  let fixed = o.now !== undefined;
  const lines: Array<[LogLevel, string]> = [];
  return {
    now: () => (fixed ? t : Date.now()),
    setNow(ms) {
      t = ms;
      fixed = true;
    },
    randomBytes: (n) => new Uint8Array(randomBytes(n)),
    storage: o.storage ?? createMemoryByteStorage(),
    log(level, message) {
      lines.push([level, message]);
    },
    lines,
  };
}
