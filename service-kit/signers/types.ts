/**
 * A Signer is the SDK's SigningKey (src/crypto/types.ts: `{ kind, alg, publicJwk, sign }`), so it
 * goes wherever a private key does (signArtifact → importSigningKey), plus what a service needs
 * to run it: a description for logs (never the key) and a way to release what it holds.
 */
import type { SigningKey } from '../../src/index.js';

export interface Signer extends SigningKey {
  /** Where the key lives, for logs and errors: `file /etc/ctl/grant.pem`, `pkcs11:token=ctl;object=root`. */
  readonly description: string;
  /** `file` (PEM in memory, dev default) or `pkcs11` (the private half never leaves the token). */
  readonly custody: 'file' | 'pkcs11';
  /** Releases sessions with the token (no-op for a file key). */
  close(): Promise<void>;
}
