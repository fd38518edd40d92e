/**
 * The persisted rollback floor of Trust Bundles (PROTOCOL.md §4: `sequence` only grows per
 * scope; a verifier refuses a bundle older than one it already accepted). Without persistence a
 * reboot would forget the floor and an attacker could replay an old bundle that still lists a
 * since-revoked grant or key; so the floor lives in the host storage and only ever rises (CAS).
 */
import type { ByteStorage } from './abi.js';
import { utf8Decode, utf8Encode } from '../src/index.js';

export interface SequenceStore {
  /** The lowest sequence still acceptable for `scopeKey` (0 when nothing was accepted yet). */
  min(scopeKey: string): number;
  /** Raises the floor to `sequence`; false if a higher floor is already stored (never lowers it). */
  raise(scopeKey: string, sequence: number): boolean;
}

/**
 * @example const seq = createSequenceStore(abi.storage); verifyTrustBundle(b, root, { minSequence: seq.min(scopeKey) })
 */
export function createSequenceStore(storage: ByteStorage, prefix = 'bundle-seq/'): SequenceStore {
  const key = (scope: string) => utf8Encode(prefix + scope);
  const read = (raw: Uint8Array | null): number => {
    if (raw === null) return 0;
    const n = Number(utf8Decode(raw));
    if (!Number.isSafeInteger(n) || n < 0) throw new Error('sequence store: corrupt record'); // fail closed
    return n;
  };
  return {
    min(scope) {
      return read(storage.get(key(scope)));
    },
    raise(scope, sequence) {
      if (!Number.isSafeInteger(sequence) || sequence < 0)
        throw new RangeError('raise: sequence must be a safe integer ≥ 0');
      for (let attempt = 0; attempt < 64; attempt++) {
        const raw = storage.get(key(scope));
        const cur = read(raw);
        if (cur > sequence) return false;
        if (cur === sequence) return true;
        if (storage.compareAndSet(key(scope), raw, utf8Encode(String(sequence)))) return true;
      }
      throw new Error('sequence store: compare-and-set lost 64 times');
    },
  };
}
