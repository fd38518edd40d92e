/**
 * Globs are matched against the canonical host (service-kit/host-name.ts), so the globs are put in
 * that form too (gateway/net/host-glob.ts canonicalGlob) where they are read. A session's
 * `merchantBlocklist` / `merchantAllowlist` entry written as another spelling of an IPv4 address
 * (`127.1`, `2130706433`, `0x7f.0.0.1`, `0177.0.0.1`) would otherwise match no host at all: a
 * blocklist blocking nothing (money to a merchant the owner blocked), an allowlist admitting
 * nothing; a pass-through entry keeping its root dot (`pinned.example.`) would be intercepted
 * instead of tunnelled. Such an entry blocks/admits `127.0.0.1`, or is refused with `malformed`.
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
  inOneHour,
  type Merchant,
  type TestDb,
  type TestGateway,
} from './helpers.js';
import { parsePassThrough } from '../../gateway/egress/config.js';
import { canonicalGlob, hostGlobList } from '../../gateway/net/host-glob.js';
import { canonicalHost } from '../../service-kit/index.js';

let db: TestDb;
let gw: TestGateway;
let merchant: Merchant;

test.before(async () => {
  merchant = await startMerchant({ amount: '100' });
  db = sqliteDb();
  gw = await startTestGateway(db);
});
test.after(async () => {
  await gw.close();
  await merchant.close();
  await db.drop();
});

const SPELLINGS = ['127.1', '2130706433', '0x7f.0.0.1', '0177.0.0.1'];

/** A session with `field: [entry]`: its id and token, or the refusal's code when it is refused. */
async function sessionWith(field: string, entry: string) {
  const res = await call(gw.url, 'POST', '/sessions', {
    key: gw.ownerKey,
    body: {
      budget: { amount: '1000', currency: 'USD' },
      purposes: ['api:search'],
      expiresAt: inOneHour(),
      [field]: [entry],
    },
  });
  if (res.status === 201) return { token: res.body.sessionToken as string };
  return { refused: `${res.status} ${res.body?.error?.code}` };
}

const pay = (token: string) =>
  proxy(gw, token, `http://127.0.0.1:${merchant.port}/item`, { purpose: 'api:search' }).then((r) =>
    r.status === 200 ? 'paid' : r.body.error.code,
  );

test('a blocklist entry in another IPv4 spelling blocks the merchant (or is refused): never a payment', async () => {
  const got: string[] = [];
  for (const entry of SPELLINGS) {
    const s = await sessionWith('merchantBlocklist', entry);
    const outcome = s.token ? await pay(s.token) : s.refused!;
    got.push(`${entry}: ${outcome}`);
  }
  const paid = got.filter((g) => g.endsWith(': paid'));
  assert.equal(paid, [], `paid a merchant its owner blocked: ${got.join('; ')}`);
  for (const g of got) assert.ok(/destination_not_allowed|400 malformed/.test(g), g);
});

test('an allowlist entry in another IPv4 spelling admits that merchant (or is refused at creation)', async () => {
  for (const entry of SPELLINGS) {
    const s = await sessionWith('merchantAllowlist', entry);
    const outcome = s.token ? await pay(s.token) : s.refused!;
    assert.ok(outcome === 'paid' || outcome === '400 malformed', `${entry}: ${outcome}`);
  }
});

test('a glob compiled from an entry matches the canonical host of that entry', () => {
  // What createMerchantMatcher needs: every literal entry matches its own canonical form.
  for (const entry of [...SPELLINGS, 'shop.example.']) {
    const canonical = canonicalHost(entry)!;
    assert.ok(hostGlobList([entry])(canonical), `${entry} does not match ${canonical}`);
  }
});

test('pass-through globs are in the canonical form the CONNECT host is matched in', () => {
  let list: string[] | undefined;
  try {
    list = parsePassThrough('Pinned.Example., 127.1');
  } catch {
    return; // refusing the entries at start is fine too
  }
  const matches = hostGlobList(list);
  assert.ok(matches('pinned.example'), `${JSON.stringify(list)} does not match pinned.example`);
  assert.ok(matches('127.0.0.1'), `${JSON.stringify(list)} does not match 127.0.0.1`);
});

test('canonicalGlob: one spelling per host, IPv6 and IDNA included; what names no host refused', () => {
  assert.is(canonicalGlob('[0:0::1]'), '::1');
  assert.is(canonicalGlob('::FFFF:127.0.0.1'), '127.0.0.1');
  assert.is(canonicalGlob('*.Bücher.Example.'), '*.xn--bcher-kva.example');
  assert.is(canonicalGlob('!0x7f.1'), '!127.0.0.1');
  assert.is(canonicalGlob('127.0.0.*'), '127.0.0.*');
  for (const bad of ['', 'a..b', '!', 'shop.example:443', 'a b', '%2e.example', '*.a..b', 'bad_host'])
    assert.is(canonicalGlob(bad), undefined, bad);
  assert.ok(hostGlobList(['[::1]'])('::1'));
});

test.run();
