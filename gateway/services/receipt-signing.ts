/**
 * A receipt signed from canonical text already at hand (PROTOCOL.md §3, §4). A gateway receipt
 * embeds the SBA it was paid under, and the SBA embeds the session's grant: signing it with the
 * SDK's `signReceipt` checks that grant again and canonicalises it again for every payment, though
 * it never changes while the session's signer lives. Here the grant's canonical text comes from
 * the prepared SBA signer that produced the SBA (computed once from its deep-frozen copy of the
 * grant, which is what the SBA's own signature covers), and the signed bytes are assembled from
 * canonical chunks: exactly `signedBytes('receipt', receipt)`, with the grant's text not
 * recomputed. The receipt's own members are still checked on every call by the SDK's receipt
 * schema; the SBA was checked (shape, consistency with its grant) when it was signed.
 */
import { canonicalize, utf8Encode, base64urlEncode, signReceipt, type SigningKey } from '../../src/index.js';
import { checkReceipt } from '../../src/artifacts/receipt.js';

/**
 * The JCS text of `rest` with one more member, `name`, whose canonical text is `memberJcs`:
 * JCS orders members by their names' UTF-16 code units (RFC 8785 §3.2.3), which is how JavaScript
 * compares strings, so the member goes between the names below it and those above it.
 */
function withMember(rest: Record<string, unknown>, name: string, memberJcs: string): string {
  const below: Record<string, unknown> = {};
  const above: Record<string, unknown> = {};
  for (const k of Object.keys(rest)) {
    if (rest[k] === undefined) continue;
    if (k === name) throw new RangeError(`withMember: '${name}' is already a member`);
    (k < name ? below : above)[k] = rest[k];
  }
  const parts = [canonicalize(below).slice(1, -1), `${canonicalize(name)}:${memberJcs}`, canonicalize(above).slice(1, -1)];
  return `{${parts.filter((p) => p.length > 0).join(',')}}`;
}

/** A signed SBA as the prepared signer returns it, and the canonical text of the grant it embeds. */
export interface PreparedSba {
  sba: Record<string, unknown>;
  /** JCS of `sba.grant`, computed once when the signer was prepared (from its frozen grant). */
  grantJcs: string;
}

/** The signed bytes of a receipt embedding `embedded.sba` (PROTOCOL.md §3: `ctl-receipt/1\n` || JCS). */
export function receiptSignedBytes(unsigned: Record<string, unknown>, embedded: PreparedSba): Uint8Array {
  const { grant: _grant, ...sbaRest } = embedded.sba;
  const sbaJcs = withMember(sbaRest, 'grant', embedded.grantJcs);
  const { sba: _sba, signature: _sig, ...receiptRest } = unsigned;
  return utf8Encode(`ctl-receipt/1\n${withMember(receiptRest, 'sba', sbaJcs)}`);
}

/**
 * Signs a receipt (the SDK's `signReceipt` fields and options); with `embedded`, the SBA it
 * carries and its grant's canonical text, without checking and canonicalising that grant again.
 */
export async function signReceiptPrepared(
  fields: Record<string, unknown>,
  options: { signingKey: SigningKey; keyId: string },
  embedded?: PreparedSba,
): Promise<Record<string, unknown>> {
  if (!embedded) return (await signReceipt(fields as any, options)) as unknown as Record<string, unknown>;
  const unsigned: Record<string, unknown> = { version: 1, ...fields, sba: embedded.sba, keyId: options.keyId };
  for (const k of Object.keys(unsigned)) if (unsigned[k] === undefined) delete unsigned[k];
  // The receipt's own members, by the SDK's schema; its SBA was checked when it was signed.
  const { sba: _sba, ...own } = unsigned;
  checkReceipt({ ...own, signature: 'A'.repeat(86) });
  const signature = base64urlEncode(await options.signingKey.sign(receiptSignedBytes(unsigned, embedded)));
  return { ...unsigned, signature };
}
