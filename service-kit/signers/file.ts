/**
 * The file signer: a PKCS#8 PEM held in memory (the development default, and what every service
 * did before signers). A key file must be readable by its owner only, as ssh insists: a key
 * others can read is a key others may have.
 */
import { readFileSync, statSync } from 'node:fs';
import { importSigningKey } from '../../src/index.js';
import type { Signer } from './types.js';

/**
 * A Signer over a PEM private key (Ed25519 or P-256).
 * @example const s = await pemSigner(process.env.KEY_PEM!, 'CTL_POLICY_GRANT_SIGNING_PRIVATE_KEY_PEM')
 */
export async function pemSigner(pem: string, description = 'PEM'): Promise<Signer> {
  const key = await importSigningKey(pem);
  return {
    kind: 'signing',
    alg: key.alg,
    publicJwk: key.publicJwk,
    custody: 'file',
    description,
    sign: (message) => key.sign(message),
    close: async () => {},
  };
}

/**
 * A Signer over a PEM file; refused when the file is readable or writable by group or others.
 * @example const s = await fileSigner('/etc/ctl/grant.key.pem')
 */
export async function fileSigner(path: string): Promise<Signer> {
  let mode: number;
  let pem: string;
  try {
    mode = statSync(path).mode;
    pem = readFileSync(path, 'utf8');
  } catch (e) {
    throw new Error(`key file '${path}' cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  if (process.platform !== 'win32' && (mode & 0o077) !== 0) {
    throw new Error(`key file '${path}' is accessible by others (mode ${(mode & 0o777).toString(8)}): chmod 600 it`);
  }
  return pemSigner(pem, `file ${path}`);
}
