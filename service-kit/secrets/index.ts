/**
 * Secrets at rest: envelope encryption (AES-256-GCM data keys under a KEK from the environment,
 * a PKCS#11 token or a development file). See README.md "Secrets at rest".
 */
export { createSealer, aesKeyWrapper, isSealed, kekIdOf, type KeyWrapper, type SecretSealer } from './envelope.js';
export { kekFromEnv, parseKek, devKek, type KekSource } from './kek.js';
export { openPkcs11Wrapper, generatePkcs11AesKey, type Pkcs11Wrapper } from './pkcs11-wrapper.js';
