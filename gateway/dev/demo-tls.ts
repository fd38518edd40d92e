/**
 * The demo merchant's HTTPS (`ctl start`): a development CA made at each start, a server
 * certificate for 127.0.0.1 signed by it, and the CA list the gateway then trusts for merchants'
 * TLS (Node's roots, NODE_EXTRA_CA_CERTS, and this CA), so the egress proxy can be tried end to
 * end on one machine. Nothing is written to disk: the agent never needs this CA, only the gateway's.
 */
import { readFileSync } from 'node:fs';
import { webcrypto } from 'node:crypto';
import { rootCertificates } from 'node:tls';
import { importSigningKey, makeCa, mintLeaf, x509Library } from '../egress/ca.js';

export interface DemoTls {
  /** The development CA's certificate (PEM). */
  caPem: string;
  /** The merchant's key and certificate for `host` (PEM), for https.createServer. */
  key: string;
  cert: string;
}

/**
 * A fresh development CA and a certificate for `host` by it, valid a week.
 * @example const tls = await demoMerchantTls('127.0.0.1', Date.now())
 */
export async function demoMerchantTls(host: string, now: number): Promise<DemoTls> {
  const ca = await makeCa('CN=CTL demo merchant development CA', now);
  const keys = (await webcrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, [
    'sign',
    'verify',
  ])) as CryptoKeyPair;
  const x509 = await x509Library();
  const cert = await mintLeaf(
    new x509.X509Certificate(ca.certPem),
    await importSigningKey(ca.keyPem),
    keys.publicKey,
    host,
    now,
  );
  const der = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey));
  const body = der.toString('base64').replace(/(.{64})/g, '$1\n');
  const key = `-----BEGIN PRIVATE KEY-----\n${body}\n-----END PRIVATE KEY-----\n`;
  return { caPem: ca.certPem, key, cert };
}

/**
 * What the gateway's forwarder trusts with the demo CA added (GatewayDeps.upstreamCa replaces
 * Node's default store, so the default is listed too: its roots and NODE_EXTRA_CA_CERTS).
 * @example gatewayOptions.upstreamCa = trustedWith(tls.caPem, process.env)
 */
export function trustedWith(caPem: string, env: Record<string, string | undefined>): string[] {
  const extra = env.NODE_EXTRA_CA_CERTS;
  let extraPem: string[] = [];
  if (extra)
    try {
      extraPem = [readFileSync(extra, 'utf8')];
    } catch {
      // Node itself only warns about an unreadable NODE_EXTRA_CA_CERTS; so does the default store.
    }
  return [...rootCertificates, ...extraPem, caPem];
}
