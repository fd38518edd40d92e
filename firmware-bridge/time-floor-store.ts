/**
 * The persisted time floor of the device (PROTOCOL.md §12), in the host storage under
 * `ctl/time-floor`: the highest clock reading recorded and `issuedAt` of everything accepted. It
 * only ever rises (CAS), so neither a reboot nor a clock set back lowers it, and every time check
 * of the device uses max(clock, floor).
 */
import type { ByteStorage } from './abi.js';
import { utf8Decode, utf8Encode, type TimeFloor } from '../src/index.js';

export interface TimeFloorStore extends TimeFloor {
  get(): number;
  raise(ms: number): void;
}

/** @example const floor = createTimeFloorStore(abi.storage); await verifyCtl(sba, { …, timeFloor: floor }) */
export function createTimeFloorStore(storage: ByteStorage, key = 'ctl/time-floor'): TimeFloorStore {
  const k = utf8Encode(key);
  const read = (raw: Uint8Array | null): number => {
    if (raw === null) return 0;
    const n = Number(utf8Decode(raw));
    if (!Number.isSafeInteger(n) || n < 0) throw new Error('time floor: corrupt record'); // fail closed
    return n;
  };
  return {
    get: () => read(storage.get(k)),
    raise(ms) {
      if (!Number.isFinite(ms)) return;
      const target = Math.floor(ms);
      for (let attempt = 0; attempt < 64; attempt++) {
        const raw = storage.get(k);
        if (read(raw) >= target) return;
        if (storage.compareAndSet(k, raw, utf8Encode(String(target)))) return;
      }
      throw new Error('time floor: compare-and-set lost 64 times');
    },
  };
}
