/**
 * How an SBA travels (spec §4.4, PROTOCOL.md §6): `Authorization: CTL <base64(JSON)>` (standard
 * base64 as the spec says; base64url accepted), or a body `{ sba }`. Header values over 16 KiB are refused.
 */
import type { SignedBudgetAuthorization } from '../artifacts/types.js';
import { CtlError, malformed } from '../errors.js';
import { canonicalize, parseStrictJson } from '../encoding/jcs.js';
import { base64DecodeLenient, base64Encode } from '../encoding/base64url.js';
import { utf8Decode, utf8Encode } from '../encoding/utf8.js';

export const MAX_HEADER_BYTES = 16 * 1024;

/** @example fetch(url, { headers: { authorization: encodeSbaHeader(sba) } }) */
export function encodeSbaHeader(sba: SignedBudgetAuthorization): string {
  return 'CTL ' + encodeSbaBase64(sba);
}

/** base64 of the SBA's JSON: the value of `X-Ctl-Sba` at gateway level 1 (spec §1). */
export function encodeSbaBase64(sba: SignedBudgetAuthorization): string {
  return base64Encode(utf8Encode(canonicalize(sba)));
}

/**
 * Reads `CTL <base64>` (or a bare base64 value, as `X-Ctl-Sba` carries) into the parsed JSON value;
 * throws `CtlError('malformed')`. The result still has to be verified.
 * @example const sba = decodeSbaHeader(req.headers.authorization)
 */
export function decodeSbaHeader(value: unknown): unknown {
  if (typeof value !== 'string') malformed('no SBA presented');
  if (value.length > MAX_HEADER_BYTES) malformed('the SBA header is larger than 16 KiB');
  const m = /^\s*(?:CTL\s+)?([A-Za-z0-9+/_=-]+)\s*$/i.exec(value);
  if (!m) malformed('expected "CTL <base64(JSON of the SBA)>"');
  return parseStrictJson(utf8Decode(base64DecodeLenient(m[1]!)));
}
