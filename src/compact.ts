/**
 * The compact form for constrained links: NFC, BLE, QR, a UART (PROTOCOL.md §6). It is
 * deterministic CBOR (RFC 8949 §4.2.1) of the very same JSON model, so nothing is re-signed:
 * signatures stay over the JCS bytes of PROTOCOL.md §3 and the JSON and CBOR forms of one
 * artifact verify identically. Its own entry (`ctl/compact`), so the core verifier does not carry
 * a CBOR codec.
 */
import type { SignedBudgetAuthorization, TrustBundle } from './artifacts/types.js';
import { checkSba } from './artifacts/sba.js';
import { checkBundle } from './artifacts/bundle.js';
import { cborDecode, cborEncode, type CborValue } from './encoding/cbor.js';
import { CtlError, malformed } from './errors.js';

export type CompactKind = 'sba' | 'bundle';
export type { CborValue };
export { cborDecode, cborEncode };

/** Which artifact a JSON value is, by its one distinguishing member. */
function kindOf(value: unknown): CompactKind {
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
    if ('authorization' in value) return 'sba';
    if ('bundleId' in value) return 'bundle';
  }
  malformed('compact: not an SBA or a Trust Bundle');
}

function check(kind: CompactKind, value: unknown): void {
  if (kind === 'sba') checkSba(value);
  else checkBundle(value);
}

/** Refuses byte strings: the JSON model has none, so a compact artifact never holds one. */
function jsonOnly(value: CborValue): void {
  if (value instanceof Uint8Array) malformed('compact: byte strings are not part of the JSON model');
  if (Array.isArray(value)) value.forEach(jsonOnly);
  else if (value !== null && typeof value === 'object') Object.values(value).forEach(jsonOnly);
}

/**
 * Deterministic CBOR of an SBA or a Trust Bundle (checked first, so only well-formed artifacts
 * are encoded). Throws `CtlError` (`malformed`, or the artifact check's code).
 * @example const bytes = encodeCompact(sba) // about 12% smaller than its JSON (keys and signatures stay text)
 */
export function encodeCompact(artifact: SignedBudgetAuthorization | TrustBundle): Uint8Array {
  check(kindOf(artifact), artifact);
  return cborEncode(artifact);
}

/**
 * Decodes a compact SBA or Trust Bundle: refuses non-canonical CBOR, anything outside the JSON
 * model and anything that is not a well-formed artifact (of `expect`, when given). The result
 * still has to be verified (`verifyCtl`, `verifyTrustBundle`): decoding proves no signature.
 * @example const sba = decodeCompact(bytes, 'sba'); await verifyCtl(sba, { amount: '30', currency: 'USD', … })
 */
export function decodeCompact(bytes: Uint8Array, expect?: CompactKind): SignedBudgetAuthorization | TrustBundle {
  const value = cborDecode(bytes);
  jsonOnly(value);
  const kind = kindOf(value);
  if (expect !== undefined && kind !== expect)
    malformed(`compact: expected ${expect === 'sba' ? 'an SBA' : 'a Trust Bundle'}`);
  check(kind, value);
  return value as unknown as SignedBudgetAuthorization | TrustBundle;
}

/** The kind of a compact artifact without checking it further. @example compactKind(bytes) // 'sba' */
export function compactKind(bytes: Uint8Array): CompactKind {
  return kindOf(cborDecode(bytes));
}
