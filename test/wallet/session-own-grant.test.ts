// A session signs under its own frozen copy of the grant, taken at creation (PROTOCOL.md §12):
// the caller editing its grant object afterwards changes nothing the session signs, and the
// grant inside each SBA cannot be edited in place either.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { canonicalize, createSession, verifyCtl } from '../../src/index.js';
import { keys, grant, fakeAuthority, T0 } from '../helpers/fixtures.js';

test("edits to the caller's grant after createSession do not reach the SBAs; they still verify", async () => {
  const k = await keys();
  const g = await grant(k);
  const original = canonicalize(g);
  const a = fakeAuthority(k);
  const s = createSession(g, { actorId: 'agent', signingKey: k.actor.privateKeyPem, fetch: a.fetch, now: () => T0 });
  (g as { maxAmountMinor: string }).maxAmountMinor = '999999999';
  g.allowedRails.push('evil');
  const sba = await s.createSba({ amount: '30', currency: 'USD', rail: 'x402' });
  assert.is(canonicalize(sba.grant), original, 'the SBA carries the grant as it was signed');
  assert.ok(Object.isFrozen(sba.grant) && Object.isFrozen(sba.grant.allowedRails));
  const r = await verifyCtl(sba, {
    amount: '30',
    currency: 'USD',
    signingKeyPem: k.authority.publicKeyPem,
    offline: true,
    now: () => T0,
  });
  assert.ok(r.valid, JSON.stringify(r));
  assert.throws(() => {
    (sba.grant as { maxAmountMinor: string }).maxAmountMinor = '1';
  }, TypeError);
});

test.run();
