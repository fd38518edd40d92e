// createSbaSigner: many SBAs under one grant, the grant checked and canonicalised once over a
// frozen copy (PROTOCOL.md §12): they verify, edits to the caller's grant reach none of them,
// and a key that is not the grant's actorKey is refused when the signer is made.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { canonicalize, verifyCtl } from '../../src/index.js';
import { createSbaSigner } from '../../src/entries/wallet.js';
import { keys, grant, T0 } from '../helpers/fixtures.js';

test("SBAs from one signer verify; the caller's later edits to its grant change none of them", async () => {
  const k = await keys();
  const g = await grant(k);
  const original = canonicalize(g);
  const signer = await createSbaSigner(g, { signingKey: k.actor.privateKeyPem, now: () => T0 });
  (g as { maxAmountMinor: string }).maxAmountMinor = '999999999';
  g.allowedRails.push('evil');
  assert.is(canonicalize(signer.grant), original);
  for (const [i, amount] of ['30', '45'].entries()) {
    const sba = await signer.sign({
      sessionId: 'sess-1',
      actorId: 'gw',
      maxAmountMinor: amount,
      budgetScope: 'SESSION',
      budgetId: `pay-${i}`,
      rail: 'x402',
      merchantId: 'merchant-a',
    });
    assert.is(canonicalize(sba.grant), original, 'signed over the grant as it was when the signer was made');
    const r = await verifyCtl(sba, {
      amount,
      currency: 'USD',
      merchantId: 'merchant-a',
      signingKeyPem: k.authority.publicKeyPem,
      offline: true,
      now: () => T0,
    });
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

test('a signer still checks every member its caller gives, each refusal naming the member', async () => {
  // The grant's own members are checked once, when the signer is made; what the caller gives, on every SBA.
  const k = await keys();
  const signer = await createSbaSigner(await grant(k), { signingKey: k.actor.privateKeyPem, now: () => T0 });
  const ok = {
    sessionId: 'sess-1',
    actorId: 'gw',
    maxAmountMinor: '30',
    budgetScope: 'SESSION',
    budgetId: 'pay-1',
    rail: 'x402',
    merchantId: 'merchant-a',
  } as const;
  await signer.sign(ok);
  const bad: Array<[string, Record<string, unknown>, RegExp]> = [
    ['budgetId', { budgetId: 'no spaces' }, /authorization\.budgetId/],
    ['sessionId', { sessionId: '' }, /authorization\.sessionId/],
    ['actorId', { actorId: 'a b' }, /authorization\.actorId/],
    ['maxAmountMinor', { maxAmountMinor: '01' }, /authorization\.maxAmountMinor/],
    ['budgetScope', { budgetScope: 'FOREVER' }, /authorization\.budgetScope/],
    ['issuedAt', { issuedAt: '2026-02-30T00:00:00Z' }, /authorization\.issuedAt/],
    ['expiresAt', { expiresAt: 'tomorrow' }, /authorization\.expiresAt/],
    ['rail', { rail: 'x 402' }, /authorization\.rail/],
    ['merchantId', { merchantId: 'merchant\u00e9' }, /authorization\.merchantId/],
    ['purpose', { purpose: 'api' }, /authorization\.purpose/],
    ['intentHash', { intentHash: 'ABC' }, /authorization\.intentHash/],
    ['issuer', { issuer: 'another issuer' }, /sba\.issuer/],
  ];
  for (const [what, over, field] of bad) {
    try {
      await signer.sign({ ...ok, ...over } as never);
      assert.unreachable(`signed with a bad ${what}`);
    } catch (e) {
      assert.is((e as { code?: string }).code, 'malformed', what);
      assert.match((e as Error).message, field, what);
    }
  }
});

test.run();
