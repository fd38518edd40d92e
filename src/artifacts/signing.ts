/**
 * The signed bytes of every artifact (PROTOCOL.md §3):
 *   UTF-8("ctl-<type>/1\n") || JCS(artifact without its "signature" member)
 * The type prefix keeps a signature of one type from being replayed as another.
 */
import type { CtlCrypto, PrivateKeyInput, PublicJwk, SigningKey, VerifyingKey } from '../crypto/types.js';
import { canonicalize } from '../encoding/jcs.js';
import { utf8Encode } from '../encoding/utf8.js';
import { base64urlDecode, base64urlEncode } from '../encoding/base64url.js';
import { passUnsupported } from '../crypto/algorithm-support.js';

/** `revocation`: a signed revocation (PROTOCOL.md §10, §14); `delegation`: a sub-grant (§14). */
export type ArtifactType = 'grant' | 'sba' | 'bundle' | 'receipt' | 'revocation' | 'delegation';

/** The exact bytes a signature of `type` covers. @example signedBytes('grant', grant) */
export function signedBytes(type: ArtifactType, artifact: Record<string, unknown>): Uint8Array {
  const { signature: _omit, ...rest } = artifact;
  return utf8Encode(`ctl-${type}/1\n` + canonicalize(rest));
}

/** Signs `unsigned` (which must already carry its keyId) and returns it with `signature`. */
export async function signArtifact<T extends Record<string, unknown>>(
  c: CtlCrypto,
  type: ArtifactType,
  unsigned: T,
  key: PrivateKeyInput | SigningKey,
): Promise<T & { signature: string }> {
  const signer = await c.importSigningKey(key);
  const sig = await signer.sign(signedBytes(type, unsigned));
  return { ...unsigned, signature: base64urlEncode(sig) };
}

/** Verifies an artifact's signature with a JWK or an imported key. Throws only `unsupported_algorithm`. */
export async function verifyArtifactSignature(
  c: CtlCrypto,
  type: ArtifactType,
  artifact: Record<string, unknown>,
  key: PublicJwk | VerifyingKey,
): Promise<boolean> {
  let msg: Uint8Array;
  try {
    msg = signedBytes(type, artifact);
  } catch {
    return false;
  }
  return verifySignedText(c, msg, artifact['signature'], key);
}

/**
 * Verifies `signature` over signed bytes already at hand (`signedBytes`, or the same text built
 * without canonicalizing again, chain-text.ts). Throws only `unsupported_algorithm`.
 * @example await verifySignedText(c, utf8Encode(`ctl-delegation/1\n${text.signed}`), link.signature, parentKey)
 */
export async function verifySignedText(
  c: CtlCrypto,
  msg: Uint8Array,
  signature: unknown,
  key: PublicJwk | VerifyingKey,
): Promise<boolean> {
  try {
    const sig = base64urlDecode(signature as string);
    return 'kind' in key && key.kind === 'verifying'
      ? await key.verify(msg, sig)
      : await c.verifyWithJwk(key as PublicJwk, msg, sig);
  } catch (e) {
    passUnsupported(e);
    return false;
  }
}
