/**
 * The egress proxy's certificate authority (gateway/README.md "Egress proxy"): one ECDSA P-256 CA
 * whose key is kept sealed in the database like the gateway's other secrets (keys/ring.ts
 * sharedSecret, under the KEK of keys/custody.ts), and per-host leaf certificates minted on the
 * fly for the hosts agents CONNECT to. Leaf keys and certificates live in memory only.
 */
import type * as X509 from '@peculiar/x509';
import { webcrypto, randomBytes, X509Certificate } from 'node:crypto';
import { isIP } from 'node:net';
import { createSecureContext, type SecureContext } from 'node:tls';
import type { SqlDatabase } from '../../service-kit/index.js';
import type { SecretSealer } from '../../service-kit/secrets/index.js';
import { LRUCache } from 'lru-cache';
import { sharedSecret } from '../keys/ring.js';

let library: Promise<typeof X509> | undefined;
/**
 * `@peculiar/x509`, loaded after the Reflect metadata polyfill it requires (its README, "Reflect
 * Polyfill Required") and set to Node's WebCrypto. Loaded lazily: a bundle evaluates its external
 * imports before its own code, so a static import would run before the polyfill.
 */
export function x509Library(): Promise<typeof X509> {
  return (library ??= (async () => {
    await import('reflect-metadata');
    const lib = await import('@peculiar/x509');
    lib.cryptoProvider.set(webcrypto as unknown as Crypto);
    return lib;
  })());
}

const ALG = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
/** The row of gw_secrets that holds the CA (key and certificate, sealed together). */
export const CA_SECRET = 'egress-ca';
const CA_YEARS = 10;
/** Leaves are short-lived: a rotated CA stops being served within this, and nothing revokes leaves. */
const LEAF_MS = 7 * 24 * 3600_000;
/**
 * Leaves kept (least recently used evicted first): an agent that CONNECTs to ever new hosts costs
 * one signature each (its CONNECT rate limit bounds how fast), never unbounded memory.
 */
export const DEFAULT_MAX_LEAVES = 1000;
/** How often an instance looks whether another rotated the CA. */
const RECHECK_MS = 30_000;

export interface EgressCa {
  /** The CA certificate agents install (PEM). */
  certPem(): Promise<string>;
  /** SHA-256 fingerprint of the CA certificate, colon-separated hex as openssl prints it. */
  fingerprint(): Promise<string>;
  /** A TLS context presenting a certificate for `host` (a DNS name or an IP address), minted once and cached. */
  contextFor(host: string): Promise<SecureContext>;
  /** A new CA replaces the stored one: certificates of the old one stop being served (owner must re-distribute). */
  rotate(): Promise<string>;
  /** Leaves cached now (at most the bound). */
  readonly cachedLeaves: number;
}

interface Authority {
  raw: string;
  cert: X509.X509Certificate;
  pem: string;
  key: CryptoKey;
  leafKeys: CryptoKeyPair;
  leafKeyPem: string;
  leaves: LRUCache<string, { at: number; ctx: Promise<SecureContext> }>;
}

const pem = (label: string, der: ArrayBuffer) =>
  `-----BEGIN ${label}-----\n${Buffer.from(der)
    .toString('base64')
    .replace(/(.{64})/g, '$1\n')
    .replace(/\n$/, '')}\n-----END ${label}-----\n`;

const serial = () => {
  const b = randomBytes(16);
  b[0] = b[0]! & 0x7f; // a positive INTEGER
  return b.toString('hex');
};

/**
 * A self-signed CA: basicConstraints critical with pathLen 0, keyCertSign, a subject key
 * identifier (strict verifiers, e.g. Python 3.13's default, want it and the leaves' authority one).
 * @example const { certPem, keyPem } = await makeCa('CN=ctl-gateway egress CA', Date.now())
 */
export async function makeCa(name: string, now: number): Promise<{ certPem: string; keyPem: string }> {
  const x509 = await x509Library();
  const keys = (await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify'])) as CryptoKeyPair;
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name,
    notBefore: new Date(now - 3600_000),
    notAfter: new Date(now + CA_YEARS * 365 * 24 * 3600_000),
    signingAlgorithm: ALG,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return {
    certPem: cert.toString('pem') + '\n',
    keyPem: pem('PRIVATE KEY', await webcrypto.subtle.exportKey('pkcs8', keys.privateKey)),
  };
}

/**
 * A server certificate for `host` signed by the CA (`caPem`, `caKey`), for `publicKey`.
 * @example await mintLeaf(caCert, caKey, leafKeys.publicKey, '127.0.0.1', Date.now())
 */
export async function mintLeaf(
  caCert: X509.X509Certificate,
  caKey: CryptoKey,
  publicKey: CryptoKey,
  host: string,
  now: number,
  validMs = LEAF_MS,
): Promise<string> {
  const x509 = await x509Library();
  const name = isIP(host) ? { type: 'ip' as const, value: host } : { type: 'dns' as const, value: host };
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: `CN=${host.replace(/[,+"\\<>;=]/g, '')}`,
    issuer: caCert.subject,
    notBefore: new Date(now - 3600_000),
    notAfter: new Date(now + validMs),
    signingAlgorithm: ALG,
    publicKey,
    signingKey: caKey,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension([name]),
      await x509.AuthorityKeyIdentifierExtension.create(caCert),
      await x509.SubjectKeyIdentifierExtension.create(publicKey),
    ],
  });
  return cert.toString('pem') + '\n';
}

/** Imports a PKCS#8 PEM ECDSA P-256 key for signing. */
export async function importSigningKey(keyPem: string): Promise<CryptoKey> {
  const der = Buffer.from(keyPem.replace(/-----[A-Z ]+-----|\s/g, ''), 'base64');
  return (await webcrypto.subtle.importKey('pkcs8', der, ALG, false, ['sign'])) as unknown as CryptoKey;
}

/**
 * The gateway's egress CA over its database: made on first use (two instances racing keep one),
 * read back sealed, re-read when another instance rotates it.
 */
export function createEgressCa(o: {
  db: SqlDatabase;
  sealer: SecretSealer;
  issuer: string;
  now: () => number;
  /** Leaf cache bound (default DEFAULT_MAX_LEAVES). */
  maxLeaves?: number;
}): EgressCa {
  const maxLeaves = o.maxLeaves ?? DEFAULT_MAX_LEAVES;
  let current: Promise<Authority> | undefined;
  let cache: Authority['leaves'] | undefined;
  let checkedAt = 0;

  async function load(): Promise<Authority> {
    const made = await makeCa(`CN=${o.issuer.replace(/[,+"\\<>;=]/g, '')} egress CA`, o.now());
    const raw = await sharedSecret(o.db, CA_SECRET, () => JSON.stringify(made), o.sealer);
    const { certPem, keyPem } = JSON.parse(raw) as { certPem: string; keyPem: string };
    const leafKeys = (await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify'])) as CryptoKeyPair;
    const x509 = await x509Library();
    return {
      raw: await storedValue(),
      cert: new x509.X509Certificate(certPem),
      pem: certPem,
      key: await importSigningKey(keyPem),
      leafKeys,
      leafKeyPem: pem('PRIVATE KEY', await webcrypto.subtle.exportKey('pkcs8', leafKeys.privateKey)),
      leaves: (cache = new LRUCache({ max: maxLeaves })),
    };
  }

  const storedValue = async () =>
    (await o.db.get<{ value: string }>(`SELECT value FROM gw_secrets WHERE name = ?`, [CA_SECRET]))?.value ?? '';

  async function authority(): Promise<Authority> {
    const t = o.now();
    if (current && t - checkedAt > RECHECK_MS) {
      checkedAt = t;
      const a = await current.catch(() => undefined);
      if (!a || (await storedValue()) !== a.raw) current = undefined;
    }
    if (!current) {
      checkedAt = t;
      current = load();
      current.catch(() => (current = undefined));
    }
    return current;
  }

  return {
    async certPem() {
      return (await authority()).pem;
    },
    async fingerprint() {
      return new X509Certificate((await authority()).pem).fingerprint256;
    },
    async contextFor(host) {
      const a = await authority();
      const key = host.toLowerCase();
      const t = o.now();
      const hit = a.leaves.get(key);
      // Re-minted a day before the leaf runs out, so no client meets an expired one.
      if (hit && t - hit.at < LEAF_MS - 24 * 3600_000) return hit.ctx;
      const ctx = mintLeaf(a.cert, a.key, a.leafKeys.publicKey, key, t).then((cert) =>
        createSecureContext({ key: a.leafKeyPem, cert }),
      );
      const entry = { at: t, ctx };
      a.leaves.set(key, entry);
      ctx.catch(() => a.leaves.peek(key) === entry && a.leaves.delete(key));
      return ctx;
    },
    get cachedLeaves() {
      return cache?.size ?? 0;
    },
    async rotate() {
      await o.db.run(`DELETE FROM gw_secrets WHERE name = ?`, [CA_SECRET]);
      current = undefined;
      return new X509Certificate((await authority()).pem).fingerprint256;
    },
  };
}
