/**
 * The gateway as an egress proxy (gateway/README.md "Egress proxy"), driven by Node's undici
 * `ProxyAgent` and `EnvHttpProxyAgent` unmodified: paid over HTTP and HTTPS within the session,
 * refused past its ceiling as /proxy refuses; 407 for missing, invalid and revoked tokens; the
 * address guard on CONNECT targets; pass-through hosts tunnelled untouched; the purpose rule.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { fetch as undiciFetch, ProxyAgent, EnvHttpProxyAgent, type Dispatcher } from 'undici';
import { X509Certificate } from 'node:crypto';
import { connect } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { request as httpRequest } from 'node:http';
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isSealed } from '../../../service-kit/secrets/envelope.js';
import { ADMIN_KEY, call } from '../helpers.js';
import { agentSession, proxyUrl, rawConnect, startStand, type Stand } from './stand.js';

const root = fileURLToPath(new URL('../../../..', import.meta.url));
let s: Stand;
test.before(async () => {
  s = await startStand();
});
test.after(async () => {
  await s?.close();
});

async function get(url: string, dispatcher: Dispatcher, headers: Record<string, string> = {}) {
  const res = await undiciFetch(url, { dispatcher, headers });
  const text = await res.text();
  let body: any;
  try {
    body = JSON.parse(text);
  } catch {}
  return { status: res.status, headers: res.headers, body, text };
}

/** `GET http://host/path` to the proxy, as curl and requests send plain http. */
function absoluteForm(url: string, token: string) {
  return new Promise<{ status: number; headers: Record<string, unknown>; text: string }>((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port: s.proxyPort,
        path: url,
        headers: { 'proxy-authorization': `Basic ${Buffer.from(`agent:${token}`).toString('base64')}` },
      },
      (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** Two paid (HTTP, then HTTPS), the third refused by the gateway at the ceiling. */
async function paysThenRefused(dispatcher: Dispatcher) {
  const before = s.http.paid.length + s.https.paid.length;
  const a = await get(`${s.http.url}/search?q=1`, dispatcher);
  assert.is(a.status, 200, a.text);
  assert.is(a.body.paid, true);
  assert.ok(a.headers.get('x-ctl-receipt-id'), 'a receipt id on the paid answer');
  const b = await get(`${s.https.url}/search?q=2`, dispatcher);
  assert.is(b.status, 200, b.text);
  assert.is(b.body.paid, true);
  assert.is(b.body.path, '/search');
  const c = await get(`${s.https.url}/search?q=3`, dispatcher);
  assert.is(c.status, 402, c.text);
  assert.is(c.headers.get('x-ctl-gateway-error'), 'budget_exceeded');
  assert.is(c.body.error.code, 'budget_exceeded');
  assert.is(s.http.paid.length + s.https.paid.length, before + 2, 'nothing paid past the ceiling');
}

test('undici ProxyAgent: pays over HTTP and HTTPS, refused past the ceiling', async () => {
  const { sessionToken, sessionId } = await agentSession(s);
  const dispatcher = new ProxyAgent({ uri: proxyUrl(s, sessionToken), requestTls: { ca: s.caPem } });
  try {
    await paysThenRefused(dispatcher);
  } finally {
    await dispatcher.close();
  }
  const view = await call(s.url, 'GET', `/sessions/${sessionId}`, { key: s.ownerKey });
  assert.is(view.body.spentMinor, '200');
  assert.is(view.body.defaultPurpose, 'api:search');
  // The merchant never sees the session token, whichever header carried it.
  for (const seen of [...s.http.seen, ...s.https.seen]) {
    assert.not.ok(seen.headers['proxy-authorization']);
    assert.not.ok(JSON.stringify(seen.headers).includes(sessionToken));
  }
});

test('undici EnvHttpProxyAgent from HTTP_PROXY / HTTPS_PROXY: pays, refused past the ceiling', async () => {
  const { sessionToken } = await agentSession(s);
  const saved = { ...process.env };
  process.env.HTTP_PROXY = process.env.HTTPS_PROXY = proxyUrl(s, sessionToken);
  process.env.NO_PROXY = process.env.no_proxy = '';
  let dispatcher: EnvHttpProxyAgent;
  try {
    dispatcher = new EnvHttpProxyAgent({ requestTls: { ca: s.caPem } } as any);
  } finally {
    for (const k of ['HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY', 'no_proxy'])
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
  }
  try {
    await paysThenRefused(dispatcher);
  } finally {
    await dispatcher.close();
  }
});

test('the certificate the agent sees is minted for the host by the CA of GET /ca.pem', async () => {
  const { sessionToken } = await agentSession(s);
  const open = await rawConnect(s, `127.0.0.1:${s.https.port}`, sessionToken);
  assert.is(open.status, 200, open.head);
  // Through a live tunnel: the leaf's issuer is the gateway CA and it names 127.0.0.1.
  const raw = connect(s.proxyPort, '127.0.0.1');
  const auth = Buffer.from(`agent:${sessionToken}`).toString('base64');
  raw.write(`CONNECT 127.0.0.1:${s.https.port} HTTP/1.1\r\nProxy-Authorization: Basic ${auth}\r\n\r\n`);
  await new Promise((r) => raw.once('data', r));
  const seen = await new Promise<X509Certificate>((resolve, reject) => {
    const t = tlsConnect({ socket: raw, ca: s.caPem, host: '127.0.0.1' }, () => {
      resolve(new X509Certificate(t.getPeerCertificate(true).raw));
      t.destroy();
    });
    t.on('error', reject);
  });
  const ca = new X509Certificate(s.caPem);
  assert.ok(seen.checkIssued(ca), 'issued by the gateway CA');
  assert.ok(seen.checkIP('127.0.0.1'));
  // The CA key is kept sealed under the KEK, like the gateway's other secrets.
  const db = await s.db.open();
  const row = await db.get<{ value: string }>(`SELECT value FROM gw_secrets WHERE name = 'egress-ca'`);
  await db.close();
  assert.ok(row && isSealed(row.value), 'sealed at rest');
  assert.not.match(row!.value, /PRIVATE KEY/);
  const noKey = await fetch(`${s.url}/ca.pem`);
  assert.is(noKey.status, 401, 'GET /ca.pem is for owners');
});

test('407 with Proxy-Authenticate: no credentials, an invalid token, a revoked session', async () => {
  // undici tunnels plain http too: its CONNECT is answered 407, which it reports as such.
  const bad = new ProxyAgent({ uri: proxyUrl(s, 'gw_sess_not-a-token') });
  const failed = await get(`${s.http.url}/search`, bad).catch((e) => e as Error);
  await bad.close();
  assert.instance(failed, Error);
  const chain = (e: any): string => (e ? `${e.message} ${chain(e.cause)}` : '');
  assert.match(chain(failed), /Proxy response \(407\)/);
  // An absolute-form request (curl's and requests' way for http) gets the 407 with its body.
  const plain = await absoluteForm(`${s.http.url}/search`, 'gw_sess_not-a-token');
  assert.is(plain.status, 407);
  assert.is(plain.headers['x-ctl-gateway-error'], 'unauthorized');
  assert.match(String(plain.headers['proxy-authenticate']), /^Basic realm="/);

  const none = await rawConnect(s, `127.0.0.1:${s.https.port}`);
  assert.is(none.status, 407);
  assert.match(none.head, /proxy-authenticate: Basic realm="ctl-gateway"/i);
  assert.match(none.body, /session token/);

  const { sessionToken, sessionId } = await agentSession(s);
  assert.is((await rawConnect(s, `127.0.0.1:${s.https.port}`, sessionToken)).status, 200);
  const del = await call(s.url, 'DELETE', `/sessions/${sessionId}`, { key: s.ownerKey });
  assert.is(del.status, 200, del.text);
  const revoked = await rawConnect(s, `127.0.0.1:${s.https.port}`, sessionToken);
  assert.is(revoked.status, 407);
  assert.is(JSON.parse(revoked.body).error.code, 'session_revoked');
  const r = await absoluteForm(`${s.http.url}/search`, sessionToken);
  assert.is(r.status, 407);
  assert.is(JSON.parse(r.text).error.code, 'session_revoked');
});

test('the address guard on CONNECT: this machine, its names and private ranges refused 403', async () => {
  const { sessionToken } = await agentSession(s);
  const before = s.http.connections;
  for (const target of [
    `127.0.0.1:${s.http.port + 1}`, // a local port no one allowed
    `localhost:${s.https.port}`, // the allowed merchant, by another name
    '169.254.169.254:443', // cloud metadata
    '[::1]:443',
    '10.0.0.1:443',
  ]) {
    const r = await rawConnect(s, target, sessionToken);
    assert.is(r.status, 403, `${target}: ${r.head}`);
    assert.match(r.head, /x-ctl-gateway-error: target_not_allowed/i);
    assert.is(JSON.parse(r.body).error.code, 'target_not_allowed');
  }
  const malformed = await rawConnect(s, 'no-port-here', sessionToken);
  assert.is(malformed.status, 400);
  assert.is(s.http.connections, before);
});

test('a pass-through host is tunnelled untouched: its own certificate, its 402, nothing paid', async () => {
  const { sessionToken, sessionId } = await agentSession(s);
  const open = await rawConnect(s, `pinned.test:${s.pinned.port}`, sessionToken);
  assert.is(open.status, 200);
  // The client verifies the merchant's own CA: the gateway's CA is not even trusted here.
  const merchantCa = (await import('node:fs')).readFileSync(s.merchantCaFile, 'utf8');
  const agent = new ProxyAgent({ uri: proxyUrl(s, sessionToken), requestTls: { ca: merchantCa } });
  const r = await get(`https://pinned.test:${s.pinned.port}/search`, agent);
  await agent.close();
  assert.is(r.status, 402, r.text);
  assert.ok(r.headers.get('x-payment'), "the merchant's own 402, untouched");
  assert.is(r.headers.get('x-ctl-gateway-error'), null);
  assert.is(s.pinned.paid.length, 0);
  const view = await call(s.url, 'GET', `/sessions/${sessionId}`, { key: s.ownerKey });
  assert.is(view.body.spentMinor, '0');
});

test('the purpose: X-Ctl-Purpose wins over defaultPurpose; neither is refused saying which to set', async () => {
  const bare = await agentSession(s, { defaultPurpose: undefined });
  const agent = new ProxyAgent({ uri: proxyUrl(s, bare.sessionToken), requestTls: { ca: s.caPem } });
  const refused = await get(`${s.https.url}/search`, agent);
  assert.is(refused.status, 402, refused.text);
  assert.is(refused.body.error.code, 'purpose_not_allowed');
  assert.match(refused.body.error.message, /X-Ctl-Purpose/);
  assert.match(refused.body.error.message, /defaultPurpose/);
  const named = await get(`${s.https.url}/search`, agent, { 'x-ctl-purpose': 'api:search' });
  assert.is(named.status, 200, named.text);
  const other = await agentSession(s, { purposes: ['api:search', 'api:other'] });
  const a2 = new ProxyAgent({ uri: proxyUrl(s, other.sessionToken), requestTls: { ca: s.caPem } });
  const wrong = await get(`${s.http.url}/search`, a2, { 'x-ctl-purpose': 'api:nope' });
  assert.is(wrong.body.error.code, 'purpose_not_allowed');
  assert.match(wrong.body.error.message, /api:nope/);
  await Promise.all([agent.close(), a2.close()]);
  const invalid = await call(s.url, 'POST', '/sessions', {
    key: s.ownerKey,
    body: {
      budget: { amount: '1', currency: 'USD' },
      purposes: ['api:search'],
      defaultPurpose: 'api:other',
      expiresAt: new Date(Date.now() + 60_000).toISOString(),
    },
  });
  assert.is(invalid.status, 400);
  assert.match(invalid.body.error.message, /^defaultPurpose:/);
});

test('ctl gateway ca prints GET /ca.pem; an admin rotation replaces the CA the tunnels present', async () => {
  const keyFile = join(s.dir, 'owner.key');
  writeFileSync(keyFile, s.ownerKey);
  const pem = await new Promise<string>((resolve, reject) =>
    execFile(
      process.execPath,
      [join(root, 'bin/ctl.mjs'), 'gateway', 'ca', '--url', s.url, '--key-file', keyFile],
      (e, out, err) => (e ? reject(new Error(`${e.message}\n${err}`)) : resolve(out)),
    ),
  );
  assert.is(pem, s.caPem);
  const owner = await call(s.url, 'POST', '/admin/egress/ca/rotate', { key: s.ownerKey });
  assert.is(owner.status, 403, "rotation is the admin's");
  const rotated = await call(s.url, 'POST', '/admin/egress/ca/rotate', { key: ADMIN_KEY });
  assert.is(rotated.status, 200, rotated.text);
  const now = await fetch(`${s.url}/ca.pem`, { headers: { authorization: `Bearer ${s.ownerKey}` } });
  const newPem = await now.text();
  assert.is.not(newPem, s.caPem);
  assert.is(now.headers.get('x-ctl-ca-fingerprint'), rotated.body.fingerprint);
  // A client that trusts only the old CA is refused by its own TLS check: the leaves are the new CA's.
  const { sessionToken } = await agentSession(s);
  const old = new ProxyAgent({ uri: proxyUrl(s, sessionToken), requestTls: { ca: s.caPem } });
  const refused = await get(`${s.https.url}/search`, old).catch((e) => e as Error);
  await old.close();
  assert.instance(refused, Error);
  const fresh = new ProxyAgent({ uri: proxyUrl(s, sessionToken), requestTls: { ca: newPem } });
  const ok = await get(`${s.https.url}/search`, fresh);
  await fresh.close();
  assert.is(ok.status, 200, ok.text);
  s.caPem = newPem;
});

test('a direct (origin-form) request to the proxy port is told what the port is', async () => {
  const r = await fetch(`http://127.0.0.1:${s.proxyPort}/proxy`);
  assert.is(r.status, 400);
  assert.is(r.headers.get('x-ctl-gateway-error'), 'malformed');
});

test.run();
