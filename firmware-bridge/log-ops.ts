/**
 * The device's transparency-log operations (README.md § Operations): a terminal pins the logs it
 * trusts (their note verifier keys, and the witnesses whose cosignatures it requires), then checks
 * that a receipt it was shown is in the gateway's log, offline, from a C2SP tlog-proof: the
 * checkpoint signed by a pinned log key and cosigned by k pinned witnesses, and the receipt's
 * entry (`logEntry('receipt', receipt)`) included under it. Needs a bundle with the log verifier
 * (`ctl-verify.iife.js` or `ctl.iife.js`); elsewhere `unknown_op`.
 */
import type * as Sdk from '../src/index.js';
import { utf8Decode, utf8Encode } from '../src/index.js';

/** The SDK part the log operations use (ctl/verify and ctl have it; ctl/wallet has not). */
export type LogSdk = Partial<Pick<typeof Sdk, 'verifyTlogProof' | 'logEntry' | 'parseVerifierKey' | 'canonicalize'>>;

/** What `provisionLog` pins: the logs' keys (type 0x01), witnesses' keys (type 0x04), the quorum. */
export interface LogPins {
  logKeys: string[];
  witnessKeys: string[];
  requireCosignatures: number;
}

export type LogProofResult =
  | { valid: true; origin: string; size: number; index: number; cosignedBy: string[] }
  | { valid: false; error: { code: string; message: string } };

export interface LogOps {
  /** Pins the logs and witnesses; once per device (the same pins again are a no-op, others `already_provisioned`). */
  provisionLog(args: { logKeys: unknown; witnessKeys?: unknown; requireCosignatures?: unknown }): LogPins;
  /** Checks a tlog-proof of an entry (a receipt by default) against the pins. Never throws on hostile input. */
  verifyLogProof(args: { proof: unknown; receipt?: unknown; type?: unknown; entry?: unknown }): Promise<LogProofResult>;
}

/** The storage record of the pins. */
export const KEY_LOG = 'ctl/log';

type Fail = (code: string, message: string) => never;

/**
 * @example const ops = createLogOps(CTL, { get, compareAndSet }, fail, parse); ops.provisionLog({ logKeys: [vkey] })
 */
export function createLogOps(
  sdk: LogSdk,
  storage: {
    get(key: Uint8Array): Uint8Array | null;
    compareAndSet(key: Uint8Array, expected: Uint8Array | null, value: Uint8Array): boolean;
  },
  fail: Fail,
  artifact: (v: unknown, what: string) => unknown,
): LogOps {
  const need = <K extends keyof LogSdk>(name: K, op: string): NonNullable<LogSdk[K]> => {
    const f = sdk[name];
    if (typeof f !== 'function') fail('unknown_op', `${op}: this device's bundle has no log verifier (${name})`);
    return f as NonNullable<LogSdk[K]>;
  };
  const keyList = (v: unknown, type: number, what: string): string[] => {
    const parse = need('parseVerifierKey', 'provisionLog');
    if (!Array.isArray(v) || v.length > 16 || !v.every((k) => typeof k === 'string'))
      fail('bad_request', `${what}: up to 16 verifier keys (text)`);
    for (const k of v as string[]) {
      let parsed: { type: number };
      try {
        parsed = parse(k);
      } catch (e) {
        return fail('bad_request', `${what}: ${(e as Error).message}`);
      }
      if (parsed.type !== type) fail('bad_request', `${what}: each a verifier key of type 0x0${type}`);
    }
    return [...(v as string[])].sort();
  };
  const pins = (): LogPins => {
    const raw = storage.get(utf8Encode(KEY_LOG));
    if (raw === null) fail('not_provisioned', 'no log is pinned on this device (provisionLog)');
    const p = JSON.parse(utf8Decode(raw));
    if (!Array.isArray(p?.logKeys) || !Array.isArray(p?.witnessKeys) || !Number.isInteger(p?.requireCosignatures))
      fail('host_failure', 'the log record is corrupt'); // fail closed
    return p;
  };

  return {
    provisionLog({ logKeys, witnessKeys = [], requireCosignatures = 0 }) {
      const p: LogPins = {
        logKeys: keyList(logKeys, 0x01, 'logKeys'),
        witnessKeys: keyList(witnessKeys, 0x04, 'witnessKeys'),
        requireCosignatures: requireCosignatures as number,
      };
      if (p.logKeys.length === 0) fail('bad_request', 'logKeys: at least one');
      if (
        !Number.isInteger(p.requireCosignatures) ||
        p.requireCosignatures < 0 ||
        p.requireCosignatures > p.witnessKeys.length
      )
        fail('bad_request', 'requireCosignatures: an integer from 0 to the number of witness keys');
      const bytes = utf8Encode(JSON.stringify(p));
      if (storage.compareAndSet(utf8Encode(KEY_LOG), null, bytes)) return p;
      if (JSON.stringify(pins()) === JSON.stringify(p)) return p;
      return fail('already_provisioned', 'other logs are already pinned on this device');
    },

    async verifyLogProof({ proof, receipt, type = 'receipt', entry }) {
      const verifyTlogProof = need('verifyTlogProof', 'verifyLogProof');
      try {
        const p = pins();
        if (typeof proof !== 'string' && !(proof instanceof Uint8Array))
          fail('bad_request', 'proof: the tlog-proof text (or its UTF-8 bytes)');
        let bytes: Uint8Array;
        if (entry !== undefined) {
          if (!(entry instanceof Uint8Array) || receipt !== undefined)
            fail('bad_request', 'entry: bytes, without receipt');
          bytes = entry as Uint8Array;
        } else {
          if (typeof type !== 'string') fail('bad_request', 'type: an artifact type such as "receipt"');
          bytes = need('logEntry', 'verifyLogProof')(type as string, artifact(receipt, 'receipt'));
        }
        const r = await verifyTlogProof(proof as string | Uint8Array, bytes, p.logKeys, {
          witnessKeys: p.witnessKeys,
          requireCosignatures: p.requireCosignatures,
        });
        if (!r.valid) return { valid: false, error: { code: r.error.code, message: r.error.message } };
        return {
          valid: true,
          origin: r.checkpoint.origin,
          size: r.checkpoint.size,
          index: r.index,
          cosignedBy: r.cosignatures.map((c) => c.name),
        };
      } catch (e) {
        const err = e as { code?: unknown; message?: unknown };
        const code = typeof err?.code === 'string' ? err.code : 'malformed';
        if (code === 'unknown_op') throw e;
        return { valid: false, error: { code, message: String(err?.message ?? e) } };
      }
    },
  };
}
