/**
 * Which signer a service key uses, from its environment variables. For a key named by `prefix`
 * (`CTL_POLICY_GRANT_SIGNING`, `CTL_TRUST_BUNDLE_ROOT`, `CTL_GATEWAY_RECEIPT`):
 *
 * - `<prefix>_KEY_PKCS11_URI`: an RFC 7512 URI of a key in a token, with `CTL_PKCS11_MODULE`
 *   (default DEFAULT_PKCS11_MODULE) naming the library;
 * - `<prefix>_PRIVATE_KEY_PEM`: the PEM itself (`\n` escapes allowed);
 * - `<prefix>_PRIVATE_KEY_FILE`: a PEM file, mode 0600.
 *
 * At most one may be set. A failure is one line naming the variable, and never a fall-back to
 * another key: a service configured for an HSM that it cannot reach does not start. A key that is
 * given wrongly (both forms, a file that cannot be read or that others can, a PEM that is no key,
 * a URI that does not parse) is a ConfigError (the commands exit 2); a token that fails is not.
 */
import { fileSigner, pemSigner } from './file.js';
import { DEFAULT_PKCS11_MODULE, openPkcs11Signer } from './pkcs11.js';
import type { Signer } from './types.js';
import { ConfigError } from '../config.js';

export interface EnvSigner {
  signer: Signer;
  /** The variable it came from, for logs and errors. */
  variable: string;
}

type Env = Record<string, string | undefined>;
const set = (v: string | undefined) => v !== undefined && v.trim() !== '';

/** The variable names a prefix reads, in the order they are tried. */
export function signerVariables(prefix: string): { pkcs11: string; pem: string; file: string } {
  return { pkcs11: `${prefix}_KEY_PKCS11_URI`, pem: `${prefix}_PRIVATE_KEY_PEM`, file: `${prefix}_PRIVATE_KEY_FILE` };
}

/** Whether any of the prefix's variables is set (so a service knows not to generate a key). */
export function signerConfigured(env: Env, prefix: string): boolean {
  return Object.values(signerVariables(prefix)).some((v) => set(env[v]));
}

/**
 * The signer `env` configures for `prefix`, or undefined when none of its variables is set.
 * @example const grant = await signerFromEnv(process.env, 'CTL_POLICY_GRANT_SIGNING') // { signer, variable } |
 * undefined
 */
export async function signerFromEnv(env: Env, prefix: string): Promise<EnvSigner | undefined>;
/** The same, reading process.env: `signerFromEnv('CTL_GATEWAY_RECEIPT')`. */
export async function signerFromEnv(prefix: string, env?: Env): Promise<EnvSigner | undefined>;
export async function signerFromEnv(a: Env | string, b?: Env | string): Promise<EnvSigner | undefined> {
  const [env, prefix] = typeof a === 'string' ? [(b as Env | undefined) ?? process.env, a] : [a, b as string];
  const vars = signerVariables(prefix);
  const given = Object.values(vars).filter((v) => set(env[v]));
  if (given.length === 0) return undefined;
  if (given.length > 1) throw new ConfigError(given.join(' and '), 'both set: give the key one way');
  const variable = given[0];
  const value = env[variable]!.trim();
  try {
    if (variable === vars.pkcs11) {
      const modulePath = set(env['CTL_PKCS11_MODULE']) ? env['CTL_PKCS11_MODULE']!.trim() : DEFAULT_PKCS11_MODULE;
      return { signer: await openPkcs11Signer(value, { modulePath }), variable };
    }
    if (variable === vars.pem) return { signer: await pemSigner(value.replace(/\\n/g, '\n'), variable), variable };
    return { signer: await fileSigner(value), variable };
  } catch (e) {
    const configured = variable !== vars.pkcs11 || e instanceof RangeError;
    if (configured) throw new ConfigError(variable, (e as Error).message);
    throw new Error(`${variable}: ${(e as Error).message}`);
  }
}
