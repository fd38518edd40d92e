/**
 * The egress proxy's test stand: a gateway started as `ctl gateway` starts it (server.ts, egress
 * listener on), an x402-style merchant over HTTP, the same over HTTPS with a certificate of its own
 * test CA (the gateway trusts that CA for upstream TLS, as NODE_EXTRA_CA_CERTS would), and a
 * "pinned" HTTPS merchant at `pinned.test` listed as pass-through.
 */
import { lookup as dnsLookup } from 'node:dns';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, isIP, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { webcrypto } from 'node:crypto';
import { silentLogger } from '../../../service-kit/index.js';
import { startGateway, type RunningGateway } from '../../../gateway/server.js';
import { makeCa, mintLeaf, importSigningKey, x509Library } from '../../../gateway/egress/ca.js';
import type { LookupFn } from '../../../gateway/net/address-guard.js';
import type { EgressConfig } from '../../../gateway/egress/config.js';
import type { GatewayRateLimits } from '../../../service-kit/service-limits.js';
import { ADMIN_KEY, call, inOneHour, sqliteDb, startMerchant, type Merchant, type TestDb } from '../helpers.js';

export interface Stand {
  db: TestDb;
  running: RunningGateway;
  url: string;
  proxyPort: number;
  ownerKey: string;
  /** Plain HTTP, HTTPS (cert for 127.0.0.1 by the merchant CA), and pass-through HTTPS at pinned.test. */
  http: Merchant;
  https: Merchant;
  pinned: Merchant;
  /** Files: the gateway's CA (what agents trust) and the merchants' own CA. */
  caFile: string;
  merchantCaFile: string;
  caPem: string;
  dir: string;
  close(): Promise<void>;
}

/** A server key and a certificate for `host` by a fresh test CA. */
async function merchantTls(caCertPem: string, caKeyPem: string, host: string) {
  const alg = { name: 'ECDSA', namedCurve: 'P-256' };
  const keys = (await webcrypto.subtle.generateKey(alg, true, ['sign', 'verify'])) as CryptoKeyPair;
  const cert = await mintLeaf(
    new (await x509Library()).X509Certificate(caCertPem),
    await importSigningKey(caKeyPem),
    keys.publicKey,
    host,
    Date.now(),
  );
  const der = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey));
  const key = `-----BEGIN PRIVATE KEY-----\n${der.toString('base64')}\n-----END PRIVATE KEY-----\n`;
  return { key, cert };
}

export async function startStand(
  o: { amount?: string; egress?: Partial<EgressConfig>; rateLimits?: GatewayRateLimits } = {},
): Promise<Stand> {
  const dir = mkdtempSync(join(tmpdir(), 'ctl-egress-'));
  const merchantCa = await makeCa('CN=merchant test CA', Date.now());
  const http = await startMerchant({ amount: o.amount ?? '100' });
  const https = await startMerchant({
    amount: o.amount ?? '100',
    tls: await merchantTls(merchantCa.certPem, merchantCa.keyPem, '127.0.0.1'),
  });
  const pinned = await startMerchant({
    amount: o.amount ?? '100',
    tls: await merchantTls(merchantCa.certPem, merchantCa.keyPem, 'pinned.test'),
  });
  // pinned.test is this machine: named so that clients CONNECT by name, as to a real pinned host.
  const resolve: LookupFn = (host, opts, cb) =>
    host === 'pinned.test'
      ? cb(null, [{ address: '127.0.0.1', family: 4 }])
      : (dnsLookup as unknown as LookupFn)(host, opts, cb);
  const db = sqliteDb();
  const running = await startGateway({
    port: 0,
    host: '127.0.0.1',
    databaseUrl: db.url,
    adminKey: ADMIN_KEY,
    logger: silentLogger(),
    env: {},
    resolve,
    // Only the merchants are reachable on this machine: any other local port is the address guard's to refuse.
    targets: {
      allowPrivate: false,
      allowHosts: [`127.0.0.1:${http.port}`, `127.0.0.1:${https.port}`, `pinned.test:${pinned.port}`],
    },
    upstreamCa: [merchantCa.certPem],
    egress: { port: 0, passThrough: ['pinned.test'], ...o.egress },
    ...(o.rateLimits ? { rateLimits: o.rateLimits } : {}),
  });
  const url = running.server.url;
  const owner = await call(url, 'POST', '/admin/owners', { key: ADMIN_KEY, body: { label: 'egress' } });
  const ownerKey = (owner.body as { apiKey: string }).apiKey;
  const ca = await fetch(`${url}/ca.pem`, { headers: { authorization: `Bearer ${ownerKey}` } });
  const caPem = await ca.text();
  if (ca.status !== 200) throw new Error(`GET /ca.pem: ${ca.status} ${caPem}`);
  const caFile = join(dir, 'gateway-ca.pem');
  const merchantCaFile = join(dir, 'merchant-ca.pem');
  writeFileSync(caFile, caPem);
  writeFileSync(merchantCaFile, merchantCa.certPem);
  return {
    db,
    running,
    url,
    proxyPort: running.egress!.port,
    ownerKey,
    http,
    https,
    pinned,
    caFile,
    merchantCaFile,
    caPem,
    dir,
    async close() {
      await running.close();
      await Promise.all([http.close(), https.close(), pinned.close()]);
      await db.drop();
    },
  };
}

/** A session for one agent: budget 200 at 100 a request, so two are paid and the third refused. */
export async function agentSession(s: Stand, config: Record<string, unknown> = {}) {
  const res = await call(s.url, 'POST', '/sessions', {
    key: s.ownerKey,
    body: {
      budget: { amount: '200', currency: 'USD' },
      purposes: ['api:search'],
      defaultPurpose: 'api:search',
      expiresAt: inOneHour(),
      ...config,
    },
  });
  if (res.status !== 201) throw new Error(`POST /sessions: ${res.status} ${res.text}`);
  return res.body as { sessionToken: string; sessionId: string };
}

/** `http://agent:<token>@127.0.0.1:<proxy port>`: what an agent puts in HTTP(S)_PROXY. */
export const proxyUrl = (s: Stand, token: string) => `http://agent:${token}@127.0.0.1:${s.proxyPort}`;

/** A CONNECT by hand, for the proxy's own answer to it (status line, headers, body). */
export function rawConnect(
  s: Stand,
  authority: string,
  token?: string,
): Promise<{ status: number; head: string; body: string }> {
  return new Promise((resolve, reject) => {
    const sock = connect(s.proxyPort, '127.0.0.1');
    let text = '';
    const auth = token ? `Proxy-Authorization: Basic ${Buffer.from(`agent:${token}`).toString('base64')}\r\n` : '';
    sock.on('connect', () => sock.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n${auth}\r\n`));
    sock.on('data', (c) => {
      text += c.toString('utf8');
      // A 200 keeps the tunnel open: its head is all there is to read.
      if (/^HTTP\/1\.1 200 /.test(text) && text.includes('\r\n\r\n')) sock.destroy();
    });
    sock.on('close', () => {
      const [head, body = ''] = text.split('\r\n\r\n');
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), head: head!, body });
    });
    sock.on('error', reject);
  });
}

/** An open CONNECT tunnel that carries HTTP/1.1 requests one after another on one connection. */
export interface Tunnel {
  /** One GET on the tunnel: the answer's status, or undefined when the tunnel is (or gets) closed. */
  get(path: string): Promise<number | undefined>;
  /** Resolves when the tunnel's connection has closed. */
  closed: Promise<void>;
  isClosed(): boolean;
  destroy(): void;
}

/**
 * A tunnel opened by hand (CONNECT, then TLS when `tls` is given), as an agent's HTTP client keeps
 * one open: what matters is what the tunnel still carries after its session ended.
 */
export async function openTunnel(
  proxyPort: number,
  authority: string,
  token: string,
  /** TLS inside the tunnel, verifying the certificate for `host` (the authority's host by default). */
  tls?: { ca: string; host?: string },
): Promise<Tunnel> {
  const raw = connect(proxyPort, '127.0.0.1');
  raw.on('error', () => {});
  const auth = Buffer.from(`agent:${token}`).toString('base64');
  raw.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\nProxy-Authorization: Basic ${auth}\r\n\r\n`);
  const head = await new Promise<string>((resolve, reject) => {
    let text = '';
    const onData = (c: Buffer) => {
      text += c.toString('latin1');
      if (!text.includes('\r\n\r\n')) return;
      raw.off('data', onData);
      raw.pause();
      resolve(text);
    };
    raw.on('data', onData);
    raw.once('close', () => reject(new Error(`CONNECT ${authority}: closed after '${text.slice(0, 80)}'`)));
  });
  if (!/^HTTP\/1\.1 200 /.test(head)) throw new Error(`CONNECT ${authority}: ${head.split('\r\n')[0]}`);
  let sock: Socket = raw;
  if (tls) {
    const name = tls.host ?? authority.replace(/:\d+$/, '');
    const secure = tlsConnect({ socket: raw, ca: tls.ca, host: name, servername: isIP(name) ? undefined : name });
    await new Promise<void>((resolve, reject) => {
      secure.once('secureConnect', () => resolve());
      secure.once('error', reject);
    });
    secure.on('error', () => {});
    sock = secure;
  }
  let isClosed = false;
  const closed = new Promise<void>((resolve) =>
    sock.once('close', () => {
      isClosed = true;
      resolve();
    }),
  );
  const host = authority.replace(/:\d+$/, '');
  return {
    closed,
    isClosed: () => isClosed,
    destroy: () => sock.destroy(),
    get(path) {
      if (isClosed || sock.destroyed) return Promise.resolve(undefined);
      return new Promise((resolve) => {
        let buf = Buffer.alloc(0);
        const done = (status: number | undefined) => {
          sock.off('data', onData);
          sock.off('close', onClose);
          resolve(status);
        };
        const onData = (c: Buffer) => {
          buf = Buffer.concat([buf, c]);
          const end = buf.indexOf('\r\n\r\n');
          if (end < 0) return;
          const text = buf.subarray(0, end).toString('latin1');
          const length = Number(/\r\ncontent-length: *(\d+)/i.exec(text)?.[1] ?? 0);
          if (buf.length >= end + 4 + length) done(Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]));
        };
        const onClose = () => done(undefined);
        sock.on('data', onData);
        sock.once('close', onClose);
        sock.resume();
        sock.write(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
      });
    },
  };
}

/** Whether `p` settles within `ms` (a bound for a test to wait, not a measure of speed). */
export const settlesWithin = (p: Promise<unknown>, ms: number) =>
  Promise.race([p.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms).unref())]);
