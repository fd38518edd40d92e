/**
 * How an SBA travels (spec §4.4, PROTOCOL.md §6): `Authorization: CTL <base64(JSON)>` (standard
 * base64 as the spec says; base64url accepted), or a body `{ sba }`. Header values over 16 KiB are
 * refused. Both are read from their text with the strict I-JSON parser (PROTOCOL.md §2).
 */
import type { SignedBudgetAuthorization } from '../artifacts/types.js';
import { CtlError, malformed } from '../errors.js';
import { canonicalize, isPlainObject, parseStrictJson } from '../encoding/jcs.js';
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

/**
 * A request body's own text (PROTOCOL.md §6 `{ "sba": <SBA> }`), read with the strict parser so a
 * repeated member is `malformed` here as in the header (§2): a body already parsed by `JSON.parse`
 * (`express.json()`) has kept only the last of two. `undefined` when the text is not JSON at all (a
 * form, an upload: the SBA may travel in the header or a parsed field); else `{ sba }`, `sba`
 * undefined when the body has no such member. JSON that presents an `sba` but is not I-JSON
 * throws `CtlError('malformed')`; other JSON that is not I-JSON presents no SBA.
 * @example const found = sbaFromBodyText(req.rawBody); if (found?.sba !== undefined) verifyCtl(found.sba, …)
 */
export function sbaFromBodyText(body: string | Uint8Array): { sba: unknown } | undefined {
  let text: string;
  try {
    text = typeof body === 'string' ? body : utf8Decode(body);
  } catch {
    return undefined; // not UTF-8, so not JSON: it can present no SBA
  }
  let data: unknown;
  try {
    data = parseStrictJson(text);
  } catch (e) {
    let loose: unknown;
    try {
      loose = JSON.parse(text);
    } catch {
      return undefined;
    }
    if (hasSba(loose)) throw e; // `malformed`, naming what is not I-JSON
    return { sba: undefined };
  }
  return { sba: hasSba(data) ? data['sba'] : undefined };
}

const hasSba = (v: unknown): v is Record<string, unknown> =>
  isPlainObject(v) && Object.prototype.hasOwnProperty.call(v, 'sba');
