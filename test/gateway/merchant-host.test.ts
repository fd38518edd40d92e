/**
 * One merchant, one host (service-kit/host-name.ts): every spelling of a host — case, the root's
 * trailing dot, IDNA, IPv4 forms, IPv4-mapped IPv6 — is counted as one merchant by the
 * per-merchant limit and velocity, matched as one by the globs, and named as one on receipts and
 * events; a host with an empty label (`shop.example..`) is refused before anything is sent.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  sqliteDb,
  startTestGateway,
  startMerchant,
  createSession,
  proxy,
  call,
  type Merchant,
  type TestDb,
  type TestGateway,
} from './helpers.js';
import { canonicalHost } from '../../service-kit/index.js';

let db: TestDb;
let gw: TestGateway;
let merchant: Merchant;
let port = 0;

test.before(async () => {
  merchant = await startMerchant({ amount: '100' });
  port = merchant.port;
  db = sqliteDb();
  gw = await startTestGateway(db, {
    // Every spelling of the two test names reaches the merchant on loopback.
    resolve: (host, _o, cb) =>
      /^(shop\.example|xn--bcher-kva\.example)\.*$/.test(host)
        ? cb(null, [{ address: '127.0.0.1', family: 4 }])
        : cb(Object.assign(new Error('ENOTFOUND'), { code: 'ENOTFOUND' }), []),
  });
});
test.after(async () => {
  await gw.close();
  await merchant.close();
  await db.drop();
});

const perMerchantDay = (extra: Record<string, unknown> = {}) =>
  createSession(gw, { velocity: { maxAmountPerMerchantPerDay: '100' }, ...extra });
const pay = (token: string, host: string) => proxy(gw, token, `http://${host}:${port}/item`, { purpose: 'api:search' });
const outcome = (r: Awaited<ReturnType<typeof pay>>) => (r.status === 200 ? 'paid' : r.body.error.code);
const receiptsOf = async (id: string) =>
  (await call(gw.url, 'GET', `/sessions/${id}/receipts`, { key: gw.ownerKey })).body.receipts as any[];

test('canonicalHost: one spelling per host; an empty label is malformed', () => {
  const cases: [string, string | undefined][] = [
    ['Shop.Example', 'shop.example'],
    ['shop.example.', 'shop.example'],
    ['SHOP.EXAMPLE.', 'shop.example'],
    ['ＳＨＯＰ．example', 'shop.example'],
    ['shop。example', 'shop.example'],
    ['bücher.example', 'xn--bcher-kva.example'],
    ['BÜCHER.example.', 'xn--bcher-kva.example'],
    ['%73hop.example', 'shop.example'],
    ['127.1', '127.0.0.1'],
    ['0x7f.0.0.1', '127.0.0.1'],
    ['2130706433', '127.0.0.1'],
    ['127.0.0.1.', '127.0.0.1'],
    ['[::FFFF:127.0.0.1]', '127.0.0.1'],
    ['::ffff:7f00:1', '127.0.0.1'],
    ['[0:0:0:0:0:0:0:1]', '::1'],
    ['2001:DB8::0:1', '2001:db8::1'],
    ['shop.example..', undefined],
    ['shop.example...', undefined],
    ['a..b', undefined],
    ['.shop.example', undefined],
    ['.', undefined],
    ['', undefined],
    ['shop.example/x', undefined],
    ['user@shop.example', undefined],
    ['shop.example:80', undefined],
    ['xn--a.example', undefined],
  ];
  for (const [host, want] of cases) assert.is(canonicalHost(host), want, host);
});

test('maxAmountPerMerchantPerDay counts every spelling of a host as one merchant', async () => {
  const s = await perMerchantDay();
  const paidBefore = merchant.paid.length;
  const got = [];
  for (const host of ['shop.example', 'SHOP.example.', 'Shop.Example.', 'shop.example..'])
    got.push(outcome(await pay(s.sessionToken, host)));
  assert.equal(got, ['paid', 'velocity_exceeded', 'velocity_exceeded', 'target_not_allowed']);
  assert.is(merchant.paid.length - paidBefore, 1, 'one merchant was paid 100, once');
  const receipts = await receiptsOf(s.sessionId);
  assert.equal(
    receipts.map((r) => r.merchant),
    ['shop.example'],
  );
});

test('IDNA and IP literal forms are one merchant too', async () => {
  const idn = await perMerchantDay();
  const a = [];
  for (const host of ['bücher.example', 'xn--bcher-kva.example.', 'BÜCHER.EXAMPLE'])
    a.push(outcome(await pay(idn.sessionToken, host)));
  assert.equal(a, ['paid', 'velocity_exceeded', 'velocity_exceeded']);
  const ip = await perMerchantDay();
  const b = [];
  for (const host of ['127.0.0.1', '127.1', '2130706433', '[::ffff:127.0.0.1]'])
    b.push(outcome(await pay(ip.sessionToken, host)));
  assert.equal(b, ['paid', 'velocity_exceeded', 'velocity_exceeded', 'velocity_exceeded']);
  assert.equal(
    (await receiptsOf(ip.sessionId)).map((r) => r.merchant),
    ['127.0.0.1'],
  );
});

test('globs see the canonical host: a blocklist entry blocks every spelling', async () => {
  const s = await createSession(gw, { merchantBlocklist: ['shop.example', '127.0.0.1', 'xn--bcher-kva.example'] });
  const got = [];
  for (const host of ['SHOP.EXAMPLE.', '[::ffff:127.0.0.1]', 'bücher.example.', '127.1'])
    got.push(outcome(await pay(s.sessionToken, host)));
  assert.equal(got, Array(4).fill('destination_not_allowed'));
  const allowed = await createSession(gw, { merchantAllowlist: ['shop.example.'] });
  assert.is(outcome(await pay(allowed.sessionToken, 'Shop.Example.')), 'paid', 'a glob written with the root dot');
  const denied = gw.events.filter((e) => e.type === 'payment.denied' && e.data.sessionId === s.sessionId);
  assert.equal([...new Set(denied.map((e) => e.data.merchant))].sort(), [
    '127.0.0.1',
    'shop.example',
    'xn--bcher-kva.example',
  ]);
});

test('a host with an empty label is refused before anything is sent', async () => {
  const s = await createSession(gw);
  const seen = merchant.seen.length;
  for (const host of ['shop.example..', 'shop..example']) {
    const res = await pay(s.sessionToken, host);
    assert.is(res.status, 403, res.text);
    assert.is(res.body.error.code, 'target_not_allowed');
    assert.match(res.body.error.message, /empty label/);
  }
  assert.is(merchant.seen.length, seen, 'the merchant saw nothing');
});

test.run();
