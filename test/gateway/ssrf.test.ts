/**
 * The forwarder's address guard: every address form of this machine, private
 * and metadata ranges, names that resolve to them (DNS rebinding) and redirects to them are
 * refused 403 target_not_allowed, and the victim server never sees a connection.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { isPublicAddress } from '../../gateway/net/address-guard.js';
import {
  sqliteDb,
  startTestGateway,
  startMerchant,
  createSession,
  proxy,
  type TestGateway,
  type Merchant,
  type TestDb,
} from './helpers.js';

let db: TestDb;
let gw: TestGateway;
let redirector: Merchant;
let victim: Server;
let victimPort = 0;
let victimConnections = 0;
let token = '';

test.before(async () => {
  victim = createServer((_req, res) => res.end('secret'));
  victim.on('connection', () => victimConnections++);
  // Dual stack, so both 127.0.0.1 and ::1 would reach it.
  await new Promise<void>((r) => victim.listen(0, '::', r));
  victimPort = (victim.address() as AddressInfo).port;
  redirector = await startMerchant();
  db = sqliteDb();
  gw = await startTestGateway(db, {
    targets: { allowPrivate: false, allowHosts: [`127.0.0.1:${redirector.port}`] },
    // A resolver playing DNS rebinding: public-looking names that answer loopback.
    resolve: (host, _o, cb) => {
      if (host === 'rebind.test') return cb(null, [{ address: '127.0.0.1', family: 4 }]);
      if (host === 'mixed.test')
        return cb(null, [
          { address: '93.184.216.34', family: 4 },
          { address: '::1', family: 6 },
        ]);
      if (host === 'localhost.' || host === 'localhost') return cb(null, [{ address: '127.0.0.1', family: 4 }]);
      cb(Object.assign(new Error('ENOTFOUND'), { code: 'ENOTFOUND' }), []);
    },
  });
  token = (await createSession(gw)).sessionToken;
});
test.after(async () => {
  await gw.close();
  await redirector.close();
  await new Promise((r) => victim.close(r));
  await db.drop();
});

test('loopback, private, link-local, metadata and mapped addresses are refused with no connection', async () => {
  const P = victimPort;
  const targets = [
    `http://127.0.0.1:${P}/`,
    `http://127.1:${P}/`,
    `http://0x7f.1:${P}/`,
    `http://2130706433:${P}/`,
    `http://017700000001:${P}/`,
    `http://[::1]:${P}/`,
    `http://[::ffff:127.0.0.1]:${P}/`,
    `http://[::ffff:7f00:1]:${P}/`,
    `http://[0:0:0:0:0:0:0:1]:${P}/`,
    `http://0.0.0.0:${P}/`,
    `http://169.254.169.254/latest/meta-data/`,
    `http://[fd00:ec2::254]/`,
    `http://10.0.0.1:${P}/`,
    `http://192.168.1.1/`,
    `http://172.16.0.1/`,
    `http://100.100.100.200/`,
    `http://localhost.:${P}/`,
    `http://localhost:${P}/`,
    `http://api.localhost:${P}/`,
    `http://rebind.test:${P}/`,
    `http://mixed.test:${P}/`,
    `http://127.0.0.1:${redirector.port + (redirector.port === 65535 ? -1 : 1)}/`, // the exception is exact host:port
    `ftp://example.com/`,
    `file:///etc/passwd`,
    `http://user:pw@example.com/`,
    `not a url`,
  ];
  for (const t of targets) {
    const started = Date.now();
    const res = await proxy(gw, token, t, { purpose: 'api:search' });
    assert.is(res.status, 403, `${t} → ${res.status} ${res.text}`);
    assert.is(res.body.error.code, 'target_not_allowed', t);
    assert.ok(Date.now() - started < 2000, `${t} refused without trying to connect`);
  }
  assert.is(victimConnections, 0, 'the victim saw no connection');
});

test(
  'a name that resolves inside the network and one that does not resolve get the same ' +
    'answer: no oracle of internal names',
  async () => {
    const answer = async (host: string) => {
      const r = await proxy(gw, token, `http://${host}:${victimPort}/`, { purpose: 'api:search' });
      return [r.status, r.body?.error?.code, String(r.body?.error?.message).replace(host, 'HOST')];
    };
    const internal = await answer('rebind.test');
    assert.equal(internal.slice(0, 2), [403, 'target_not_allowed']);
    assert.equal(await answer('nowhere.test'), internal);
  },
);

test('a redirect to a forbidden address is refused at that hop', async () => {
  const P = victimPort;
  const before = redirector.seen.length;
  for (const to of [
    `http://127.0.0.1:${P}/`,
    `http://[::1]:${P}/`,
    `http://169.254.169.254/`,
    `http://rebind.test:${P}/`,
    `http://2130706433:${P}/`,
  ]) {
    const res = await proxy(gw, token, `http://127.0.0.1:${redirector.port}/redirect?to=${encodeURIComponent(to)}`, {
      purpose: 'api:search',
    });
    assert.is(res.status, 403, `${to}: ${res.text}`);
    assert.is(res.body.error.code, 'target_not_allowed');
  }
  assert.is(redirector.seen.length - before, 5, 'the allowed first hop was reached');
  assert.is(victimConnections, 0);
  // The excepted host itself works.
  const ok = await proxy(gw, token, `http://127.0.0.1:${redirector.port}/free`, { purpose: 'api:search' });
  assert.is(ok.status, 200);
});

test('a paid retry redirected to another origin does not carry the payment proof', async () => {
  const sink = await startMerchant();
  // Pays-then-redirects: 402 first, then answers the paid retry with a redirect to `sink`.
  const payer = createServer((req, res) => {
    if (!req.headers['x-payment-receipt']) {
      res.writeHead(402, { 'x-payment': JSON.stringify({ amount: '100', currency: 'USD', address: 'm' }) });
      return res.end();
    }
    res.writeHead(307, { location: `${sink.url}/free` });
    res.end();
  });
  await new Promise<void>((r) => payer.listen(0, '127.0.0.1', r));
  const db2 = sqliteDb();
  const open = await startTestGateway(db2);
  try {
    const s = await createSession(open, { trustLevel: 1 });
    const res = await proxy(open, s.sessionToken, `http://127.0.0.1:${(payer.address() as AddressInfo).port}/pay`, {
      purpose: 'api:search',
    });
    assert.is(res.status, 200, res.text);
    const seen = sink.seen.at(-1)!.headers;
    assert.is(seen['x-payment-receipt'], undefined);
    assert.is(seen['x-ctl-sba'], undefined);
  } finally {
    await open.close();
    await sink.close();
    await new Promise((r) => payer.close(r));
    await db2.drop();
  }
});

test('isPublicAddress: unit table', () => {
  for (const a of ['8.8.8.8', '93.184.216.34', '2606:4700:4700::1111']) assert.ok(isPublicAddress(a), a);
  for (const a of [
    '127.0.0.1',
    '10.1.2.3',
    '172.31.255.255',
    '192.168.0.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '224.0.0.1',
    '255.255.255.255',
    '::1',
    '::',
    '::ffff:127.0.0.1',
    '::ffff:8.8.8.8',
    '64:ff9b::7f00:1',
    'fe80::1',
    'fc00::1',
    'fd00:ec2::254',
    'ff02::1',
    'not-an-ip',
  ]) {
    assert.not.ok(isPublicAddress(a), a);
  }
});

test.run();
