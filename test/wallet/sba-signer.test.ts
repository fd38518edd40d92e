// createSbaSigner: many SBAs under one grant, the grant checked and canonicalised once over a
// frozen copy (PROTOCOL.md §12): they verify, edits to the caller's grant reach none of them,
// and a key that is not the grant's actorKey is refused when the signer is made.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { canonicalize, verifyCtl } from '../../src/index.js';
import { createSbaSigner } from '../../src/entries/wallet.js';
import { keys, grant, T0 } from '../helpers/fixtures.js';

test('SBAs from one signer verify; the caller\'s later edits to its grant change none of them', async () => {
  const k = await keys();
  const g = await grant(k);
  const original = canonicalize(g);
  const signer = await createSbaSigner(g, { signingKey: k.actor.privateKeyPem, now: () => T0 });
  (g as { maxAmountMinor: string }).maxAmountMinor = '999999999';
  g.allowedRails.push('evil');
  assert.is(canonicalize(signer.grant), original);
  for (const [i, amount] of ['30', '45'].entries()) {
    const sba = await signer.sign({ sessionId: 'sess-1', actorId: 'gw', maxAmountMinor: amount, budgetScope: 'SESSION', budgetId: `pay-${i}`, rail: 'x402', merchantId: 'merchant-a' });
    assert.is(canonicalize(sba.grant), original, 'signed over the grant as it was when the signer was made');
    const r = await verifyCtl(sba, { amount, currency: 'USD', merchantId: 'merchant-a', signingKeyPem: k.authority.publicKeyPem, offline: true, now: () => T0 });
    assert.ok(r.valid, JSON.stringify(r));
  }
});

test('a key that is not grant.actorKey is refused when the signer is made', async () => {
  const k = await keys();
  const g = await grant(k);
  try {
    await createSbaSigner(g, { signingKey: k.authority.privateKeyPem });
    assert.unreachable('signed with the wrong key');
  } catch (e) {
    assert.instance(e, RangeError);
    assert.match((e as Error).message, /grant\.actorKey/);
  }
});

test.run();
