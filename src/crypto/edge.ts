/**
 * The crypto facade of `dist/edge.js`: WebCrypto only, nothing from @noble (the edge bundle must
 * stay ≤ 5 KB gzip). Same key forms and the same strict verification (PROTOCOL.md §3) as the
 * default facade, since both are built from keys.ts and backend.ts.
 */
import { hostSubtle } from '../host.js';
import { base64urlEncode } from '../encoding/base64url.js';
import { utf8Encode } from '../encoding/utf8.js';
import { thumbprintInput, thumbprintMembers } from './jwk.js';
import { createKeyImporter } from './keys.js';
import { createSubtleBackend } from './subtle-backend.js';
import { randomBytes } from './random.js';
import type { Backend } from './backend.js';
import type { CtlCrypto } from './types.js';

let backend: Backend | undefined;
const subtleBackend = (): Backend =>
  (backend ??= createSubtleBackend(hostSubtle() ?? (() => { throw new Error('edge crypto needs WebCrypto (crypto.subtle)'); })()));

const importer = createKeyImporter(subtleBackend);

/** WebCrypto SHA-256. @example await edgeCrypto.sha256(bytes) */
const sha256 = (data: Uint8Array) => subtleBackend().sha256(data);

/**
 * The WebCrypto-only facade. @example const key = await edgeCrypto.importVerifyingKey(jwk); await key.verify(msg, sig)
 */
export const edgeCrypto: CtlCrypto = {
  ...importer,
  sha256,
  async jwkThumbprint(jwk) {
    return base64urlEncode(await sha256(utf8Encode(thumbprintInput(thumbprintMembers(jwk)))));
  },
  randomBytes,
};
