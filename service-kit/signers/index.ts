/**
 * Signers for the services' long-lived keys (grant, Trust Bundle root, receipt): the SDK's
 * SigningKey with custody attached. See README.md "Signers".
 */
export type { Signer } from './types.js';
export { pemSigner, fileSigner } from './file.js';
export {
  openPkcs11Signer,
  generatePkcs11Key,
  generatePkcs11Ed25519Key,
  closePkcs11Modules,
  DEFAULT_PKCS11_MODULE,
  type Pkcs11SignerOptions,
} from './pkcs11.js';
export { parsePkcs11Uri, readPin, type Pkcs11Uri } from './pkcs11-uri.js';
export { signerFromEnv, signerConfigured, signerVariables, type EnvSigner } from './env.js';
export { signingOffThread, ed25519KeyObject } from './off-thread.js';
