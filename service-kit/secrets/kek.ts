/**
 * Where a service's key-encryption key comes from (envelope.ts):
 *
 * - `<VAR>`: 32 bytes as base64url (43 characters) or hex (64); the production setting, the same
 *   on every instance sharing a database;
 * - `<VAR>_PKCS11_URI`: an AES-256 key in a PKCS#11 token (`CTL_PKCS11_MODULE`), which wraps the
 *   data keys inside the token (CKM_AES_GCM);
 * - neither: a development KEK generated once into `devFile` with mode 0600 (a file beside the
 *   database on the same disk protects against a leaked database dump or backup, not against
 *   someone who can read the disk: say so, and set the variable in production).
 */
import { closeSync, openSync, readFileSync, statSync, writeSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { randomBytes } from 'node:crypto';
import { aesKeyWrapper, createSealer, type SecretSealer } from './envelope.js';
import { openPkcs11Wrapper } from './pkcs11-wrapper.js';
import { DEFAULT_PKCS11_MODULE } from '../signers/pkcs11.js';

export interface KekSource {
  sealer: SecretSealer;
  /** `env`, `pkcs11` or `dev-file` (then say so in the log). */
  source: 'env' | 'pkcs11' | 'dev-file';
  /** Releases the token session of a PKCS#11 KEK. */
  close(): Promise<void>;
}

type Env = Record<string, string | undefined>;
const set = (v: string | undefined) => v !== undefined && v.trim() !== '';

/** 32 bytes from base64url (43 characters) or hex (64 digits); RangeError naming the variable otherwise. */
export function parseKek(text: string, variable: string): Uint8Array {
  const t = text.trim();
  if (/^[0-9a-fA-F]{64}$/.test(t)) return Buffer.from(t, 'hex');
  if (/^[A-Za-z0-9_-]{43}$/.test(t)) {
    const b = Buffer.from(t, 'base64url');
    if (b.length === 32 && b.toString('base64url') === t) return b;
  }
  throw new RangeError(
    `${variable}: expected 32 random bytes as base64url (43 characters) or hex (64 digits); ` +
      `make one with: node -e "console.log(require('crypto').randomBytes(32).toString('base64url'))"`,
  );
}

/**
 * Reads the development KEK file, or creates it (mode 0600, never overwritten; two processes racing read the same one).
 */
export function devKek(path: string): Uint8Array {
  mkdirSync(dirname(path), { recursive: true });
  try {
    const fd = openSync(path, 'wx', 0o600);
    try {
      writeSync(fd, `${randomBytes(32).toString('base64url')}\n`);
    } finally {
      closeSync(fd);
    }
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST')
      throw new Error(`cannot create the development KEK '${path}': ${(e as Error).message}`);
  }
  if (process.platform !== 'win32' && (statSync(path).mode & 0o077) !== 0) {
    throw new Error(`the development KEK '${path}' is accessible by others: chmod 600 it`);
  }
  for (let i = 0; ; i++) {
    const text = readFileSync(path, 'utf8');
    // Another process created it a moment ago and has not written it yet.
    if (text.trim() === '' && i < 50) {
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
      continue;
    }
    return parseKek(text, `the development KEK '${path}'`);
  }
}

/**
 * The sealer `env` configures under `variable`, or the development KEK in `devFile`.
 * @example const { sealer, source } = await kekFromEnv(process.env, 'CTL_GATEWAY_KEK', './data/gateway.kek')
 */
export async function kekFromEnv(env: Env, variable: string, devFile: string): Promise<KekSource> {
  const uriVar = `${variable}_PKCS11_URI`;
  if (set(env[variable]) && set(env[uriVar]))
    throw new Error(`${variable} and ${uriVar} are both set: give the KEK one way`);
  if (set(env[variable])) {
    return {
      sealer: createSealer(aesKeyWrapper(parseKek(env[variable]!, variable), variable), variable),
      source: 'env',
      close: async () => {},
    };
  }
  if (set(env[uriVar])) {
    const modulePath = set(env['CTL_PKCS11_MODULE']) ? env['CTL_PKCS11_MODULE']!.trim() : DEFAULT_PKCS11_MODULE;
    let w;
    try {
      w = await openPkcs11Wrapper(env[uriVar]!.trim(), { modulePath });
    } catch (e) {
      throw new Error(`${uriVar}: ${(e as Error).message}`);
    }
    return { sealer: createSealer(w, uriVar), source: 'pkcs11', close: () => w.close() };
  }
  return {
    sealer: createSealer(aesKeyWrapper(devKek(devFile), `file ${devFile}`), variable),
    source: 'dev-file',
    close: async () => {},
  };
}
