// PROTOCOL.md §12: an answer may be cached for an artifact's bytes, never for a JavaScript object.
// A grant object checked or signed under once, then edited in place, is checked (and its bytes
// taken) again.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createSignedSessionBudgetAuthorization, parseGrant, verifyCtl } from '../../src/index.js';
import { keys, grant, T0, type Keys } from '../helpers/fixtures.js';

let k: Keys;
test.before(async () => {
  k = await keys();
});

const code = (r: Awaited<ReturnType<typeof verifyCtl>>) => (r.valid ? 'valid' : r.error.code);

test('parseGrant: a grant checked once and then edited in place into a malformed one is refused', async () => {
  const g = await grant(k);
  parseGrant(g);
  (g as { destinationAllowlist?: string[] }).destinationAllowlist = [];
  assert.throws(
    () => parseGrant(g),
    (e: Error & { code?: string }) => e.code === 'malformed',
  );
  const h = await grant(k);
  parseGrant(h);
  (h as unknown as Record<string, unknown>)['maxAmountMinor'] = 5000;
  assert.throws(
    () => parseGrant(h),
    (e: Error & { code?: string }) => e.code === 'malformed',
  );
});

test('parseGrant: a member that is own but not enumerable is absent, as in the signed bytes', async () => {
  const g = await grant(k);
  // canonicalize (the signed bytes) leaves it out, so the shape check must not count it present.
  Object.defineProperty(g, 'maxAmountMinor', { value: g.maxAmountMinor, enumerable: false });
  assert.throws(
    () => parseGrant(g),
    (e: Error & { code?: string; message: string }) =>
      e.code === 'malformed' && /missing member "maxAmountMinor"/.test(e.message),
  );
});

test('signing an SBA under a grant object replaced in place by a renewed grant signs the renewed bytes', async () => {
  const g = await grant(k);
  const opts = { signingKey: k.actor.privateKeyPem, now: () => T0 };
  const fields = {
    sessionId: 'sess_1',
    actorId: 'vehicle-42',
    maxAmountMinor: '30',
    rail: 'x402',
    merchantId: 'merchant-a',
  };
  const verifyOpts = {
    amount: '30',
    currency: 'USD',
    merchantId: 'merchant-a',
    offline: true,
    signingKeyPem: k.authority.publicKeyPem,
    now: () => T0,
  };
  assert.is(
    code(await verifyCtl(await createSignedSessionBudgetAuthorization({ ...fields, grant: g }, opts), verifyOpts)),
    'valid',
  );
  Object.assign(g, await grant(k, { maxAmountMinor: '6000' }));
  const sba = await createSignedSessionBudgetAuthorization({ ...fields, grant: g }, opts);
  assert.is(sba.grant.maxAmountMinor, '6000');
  assert.is(code(await verifyCtl(sba, verifyOpts)), 'valid');
});

test.run();
