/**
 * GET /metrics of the authority as a Prometheus user reads it: process and Node.js defaults,
 * and business counters (grants issued by signer, revocations by how, bundles issued, revocation
 * checks by answer) that move with real requests, parsed by parse-prometheus-text-format.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  generateKeyPair,
  didKeyFromJwk,
  signPreparedGrant,
  createSignedRevocation,
  formatTimestamp,
} from '../../src/index.js';
import { grantRequest, startTestAuthority, type TestAuthority } from './harness.js';
import { assertBoundedLabels, scrape } from '../service-kit/prometheus-scrape.js';

let t: TestAuthority;
test.before(async () => {
  t = await startTestAuthority();
});
test.after(async () => {
  await t.close();
});

test('process and Node.js defaults, and business counters that move with requests', async () => {
  const before = await scrape(t.url);
  before.family('process_cpu_seconds_total', 'COUNTER');
  before.family('process_resident_memory_bytes', 'GAUGE');
  before.family('nodejs_heap_size_used_bytes', 'GAUGE');
  for (const signer of ['authority', 'person'])
    assert.is(before.value('ctl_authority_grants_issued_total', { signer }), 0);

  const wallet = await generateKeyPair({ alg: 'EdDSA' });
  const issued = [];
  for (let i = 0; i < 2; i++) {
    const r = await t.call('POST', '/grants', await grantRequest(t, wallet.publicJwk));
    assert.is(r.status, 201, JSON.stringify(r.body));
    issued.push(r.body.grantId as string);
  }
  // A grant signed by an enrolled person, then revoked by a revocation that person signs.
  const person = await generateKeyPair({ alg: 'ES256' });
  const did = didKeyFromJwk(person.publicJwk);
  assert.is((await t.call('POST', '/humans', { did, label: 'Alex' })).status, 201);
  const prep = await t.call(
    'POST',
    '/grants/human/prepare',
    {
      issuer: did,
      actorKey: wallet.publicJwk,
      maxAmountMinor: '2000',
      currency: 'EUR',
      allowedPurposes: ['travel:booking'],
      expiresAt: formatTimestamp(Date.now() + 3600_000),
    },
    null,
  );
  const personal = await signPreparedGrant(prep.body.grant, person.privateKeyPem);
  assert.is((await t.call('POST', '/grants', personal, null)).status, 201);

  assert.is((await t.call('POST', '/revoke', { grantId: issued[0] })).status, 200);
  assert.is(
    (await t.call('POST', `/grants/${issued[0]}/revoke`, {})).status,
    200,
    'a repeat is idempotent and not counted',
  );
  const signed = await createSignedRevocation({ grantId: personal.grantId }, { signingKey: person.privateKeyPem });
  assert.is((await t.call('POST', '/revoke', signed, null)).status, 200);

  for (const id of [issued[0], issued[1], issued[1], personal.grantId])
    assert.is((await t.call('GET', `/revoke?grantId=${id}`, undefined, null)).status, 200);
  assert.is((await t.call('GET', '/revoke?grantId=grant_unknown', undefined, null)).status, 404);
  const expiresAt = formatTimestamp(Date.now() + 86_400_000);
  for (const category of ['ev', 'travel'])
    assert.is((await t.call('POST', '/trust-bundles', { scope: { category }, expiresAt })).status, 201);

  const after = await scrape(t.url);
  assertBoundedLabels(after.family('ctl_authority_grants_issued_total', 'COUNTER'));
  assert.is(after.value('ctl_authority_grants_issued_total', { signer: 'authority' }), 2);
  assert.is(after.value('ctl_authority_grants_issued_total', { signer: 'person' }), 1);
  assertBoundedLabels(after.family('ctl_authority_revocations_total', 'COUNTER'));
  assert.is(after.value('ctl_authority_revocations_total', { via: 'api' }), 1);
  assert.is(after.value('ctl_authority_revocations_total', { via: 'signed' }), 1);
  after.family('ctl_authority_bundles_issued_total', 'COUNTER');
  assert.is(after.value('ctl_authority_bundles_issued_total'), 2);
  assertBoundedLabels(after.family('ctl_authority_revocation_checks_total', 'COUNTER'));
  assert.is(after.value('ctl_authority_revocation_checks_total', { answer: 'revoked' }), 2);
  assert.is(after.value('ctl_authority_revocation_checks_total', { answer: 'not_revoked' }), 2);
  assert.is(after.value('ctl_authority_revocation_checks_total', { answer: 'unknown' }), 1);
  assertBoundedLabels(after.family('ctl_authority_http_requests_total', 'COUNTER'));
  after.family('ctl_authority_http_request_duration_seconds', 'HISTOGRAM');
});

test.run();
