/**
 * A person's grant with the real authority behind it (PROTOCOL.md §10): the gateway accepts a
 * grant that its trusted authority recorded for an enrolled person, refuses one that authority
 * never recorded (a person not enrolled there), and a revocation the authority records (signed by
 * the person, or by removing the person) stops the very next payment.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  createSignedPolicyGrant,
  createSignedRevocation,
  didKeyFromJwk,
  formatTimestamp,
  generateKeyPair,
  policyHash,
  signPreparedGrant,
  type PolicyGrant,
} from '../../src/index.js';
import { startTestAuthority, type TestAuthority } from '../authority/harness.js';
import { readGatewayConfig } from '../../gateway/config.js';
import {
  call,
  proxy,
  sqliteDb,
  startMerchant,
  startTestGateway,
  type Merchant,
  type TestDb,
  type TestGateway,
} from './helpers.js';

let authority: TestAuthority;
let db: TestDb;
let gw: TestGateway;
let merchant: Merchant;

test.before(async () => {
  authority = await startTestAuthority();
  db = sqliteDb();
  gw = await startTestGateway(db, { humanAuthorities: [authority.url] });
  merchant = await startMerchant({ amount: '100' });
});
test.after(async () => {
  await gw.close();
  await merchant.close();
  await db.drop();
  await authority.close();
});

/** An enrolled person's grant for a key the gateway prepared, recorded at the authority. */
async function enrolledGrant(person: { privateKeyPem: string; publicJwk: object }): Promise<PolicyGrant> {
  const key = (await call(gw.url, 'POST', '/sessions/human/keys', { key: gw.ownerKey })).body;
  const prep = await authority.call(
    'POST',
    '/grants/human/prepare',
    {
      issuer: didKeyFromJwk(person.publicJwk as any),
      actorKey: key.actorKey,
      maxAmountMinor: '1000',
      currency: 'USD',
      allowedPurposes: ['api:search'],
      allowedRails: ['ledger'],
      expiresAt: formatTimestamp(Date.now() + 3600_000),
    },
    null,
  );
  assert.is(prep.status, 201, JSON.stringify(prep.body));
  const grant = await signPreparedGrant(prep.body.grant, person.privateKeyPem);
  assert.is((await authority.call('POST', '/grants', grant, null)).status, 201);
  return grant;
}

async function enrol() {
  const person = await generateKeyPair({ alg: 'ES256' });
  assert.is(
    (await authority.call('POST', '/humans', { did: didKeyFromJwk(person.publicJwk), label: 'person' })).status,
    201,
  );
  return person;
}

test('an enrolled person revokes at the authority: the payment right after is refused', async () => {
  const person = await enrol();
  const grant = await enrolledGrant(person);
  const s = await call(gw.url, 'POST', '/sessions', { key: gw.ownerKey, body: { humanGrant: grant } });
  assert.is(s.status, 201, s.text);
  assert.is((await proxy(gw, s.body.sessionToken, `${merchant.url}/one`, { purpose: 'api:search' })).status, 200);
  const paid = merchant.paid.length;
  const revocation = await createSignedRevocation({ grantId: grant.grantId }, { signingKey: person.privateKeyPem });
  assert.is((await authority.call('POST', '/revoke', revocation, null)).status, 200);
  const next = await proxy(gw, s.body.sessionToken, `${merchant.url}/two`, { purpose: 'api:search' });
  assert.is(next.body?.error?.code, 'grant_revoked', next.text);
  assert.is(merchant.paid.length, paid, 'nothing paid after the revocation');
});

test('a person removed from the authority: their session stops at the next payment', async () => {
  const person = await enrol();
  const s = await call(gw.url, 'POST', '/sessions', {
    key: gw.ownerKey,
    body: { humanGrant: await enrolledGrant(person) },
  });
  assert.is(s.status, 201, s.text);
  assert.is((await proxy(gw, s.body.sessionToken, `${merchant.url}/one`, { purpose: 'api:search' })).status, 200);
  assert.is(
    (await authority.call('DELETE', `/humans/${encodeURIComponent(didKeyFromJwk(person.publicJwk))}`)).status,
    200,
  );
  const next = await proxy(gw, s.body.sessionToken, `${merchant.url}/two`, { purpose: 'api:search' });
  assert.is(next.body?.error?.code, 'grant_revoked', next.text);
});

test(
  'a person not enrolled at the trusted authority: a self-signed grant naming it is ' + 'refused at session creation',
  async () => {
    const stranger = await generateKeyPair({ alg: 'ES256' });
    const key = (await call(gw.url, 'POST', '/sessions/human/keys', { key: gw.ownerKey })).body;
    const grant = await createSignedPolicyGrant(
      {
        profile: 'human-agent',
        policyHash: policyHash({ delegate: 'search' }),
        actorKey: key.actorKey,
        allowedRails: ['ledger'],
        allowedAssets: [{ standard: 'iso4217', code: 'USD' }],
        allowedPurposes: ['api:search'],
        maxAmountMinor: '1000',
        currency: 'USD',
        expiresAt: formatTimestamp(Date.now() + 3600_000),
      } as any,
      { signingKey: stranger.privateKeyPem, revocationBaseUrl: authority.url },
    );
    const r = await call(gw.url, 'POST', '/sessions', { key: gw.ownerKey, body: { humanGrant: grant } });
    assert.is(r.body?.error?.code, 'issuer_not_trusted', r.text);
  },
);

test(
  "a stranger's grant bearing an enrolled person's grant id is refused: the authority " +
    'is asked about that grant, not its id',
  async () => {
    const person = await enrol();
    const real = await enrolledGrant(person);
    const stranger = await generateKeyPair({ alg: 'ES256' });
    const key = (await call(gw.url, 'POST', '/sessions/human/keys', { key: gw.ownerKey })).body;
    const copy = await createSignedPolicyGrant(
      {
        grantId: real.grantId,
        profile: 'human-agent',
        policyHash: policyHash({ delegate: 'search' }),
        actorKey: key.actorKey,
        allowedRails: ['ledger'],
        allowedAssets: [{ standard: 'iso4217', code: 'USD' }],
        allowedPurposes: ['api:search'],
        maxAmountMinor: '100000',
        currency: 'USD',
        expiresAt: formatTimestamp(Date.now() + 3600_000),
      } as any,
      { signingKey: stranger.privateKeyPem, revocationBaseUrl: authority.url },
    );
    assert.is(copy.revocationUrl, real.revocationUrl);
    const r = await call(gw.url, 'POST', '/sessions', { key: gw.ownerKey, body: { humanGrant: copy } });
    assert.is(r.body?.error?.code, 'issuer_not_trusted', r.text);
    // The person's own grant still backs a session.
    assert.is((await call(gw.url, 'POST', '/sessions', { key: gw.ownerKey, body: { humanGrant: real } })).status, 201);
  },
);

test('CTL_GATEWAY_HUMAN_AUTHORITIES: a list of http(s) base URLs, a mistake named by its variable', () => {
  assert.equal(
    readGatewayConfig({ CTL_GATEWAY_HUMAN_AUTHORITIES: 'https://a.example/, http://10.0.0.5:8700' }).humanAuthorities,
    ['https://a.example', 'http://10.0.0.5:8700'],
  );
  assert.equal(readGatewayConfig({}).humanAuthorities, []);
  for (const bad of ['authority.example', 'ftp://a.example', 'https://a.example/?x=1', 'https://u:p@a.example']) {
    assert.throws(
      () => readGatewayConfig({ CTL_GATEWAY_HUMAN_AUTHORITIES: bad }),
      /^CTL_GATEWAY_HUMAN_AUTHORITIES/,
      bad,
    );
  }
});

test.run();
