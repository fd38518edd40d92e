/**
 * A receipt signed from the prepared SBA signer's grant text (gateway/services/receipt-signing.ts)
 * is byte for byte the receipt the SDK signs: the same signed bytes (PROTOCOL.md §3), the same
 * signature, verified by `verifyReceipt`; and its own members are still checked per receipt.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createSbaSigner } from '../../src/entries/wallet.js';
import { canonicalize, formatTimestamp, generateKeyPair, importSigningKey, signReceipt, signedBytes, verifyReceipt } from '../../src/index.js';
import { receiptSignedBytes, signReceiptPrepared } from '../../gateway/services/receipt-signing.js';
import { grant, keys } from '../helpers/fixtures.js';

const NOW = Date.UTC(2026, 10, 25, 1, 0, 0);

async function setup(over: Record<string, unknown> = {}) {
  const k = await keys();
  const g = await grant(k, over as any, NOW);
  const signer = await createSbaSigner(g, { signingKey: k.actor.privateKeyPem, now: () => NOW });
  const rk = await generateKeyPair({ alg: 'EdDSA' });
  const receiptKey = await importSigningKey(rk.privateKeyPem);
  // The signer's own canonical text (what the gateway splices in) is the grant's JCS.
  assert.is(signer.grantJcs, canonicalize(signer.grant));
  return { signer, grantJcs: signer.grantJcs, receiptKey, publicKey: rk.publicJwk };
}

const fields = (i: number, over: Record<string, unknown> = {}) => ({
  receiptId: `rcpt_${i}`, sessionId: 'ses_abc', grantId: 'gr_1', purpose: 'api:search',
  amount: { amountMinor: String(1 + i), currency: 'USD' }, merchant: 'merchant-a', paidAt: formatTimestamp(NOW),
  txRef: `txid:${i}`, rail: 'ledger', ...over,
});

test('same signed bytes and signature as the SDK, with and without an SBA issuer, across member values', async () => {
  for (const over of [{}, { destinationAllowlist: ['merchant-a', 'a~b\\c', 'z'] }]) {
    const { signer, grantJcs, receiptKey, publicKey } = await setup(over);
    for (const [i, issuer] of [[0, 'authority.test'], [1, undefined]] as const) {
      const sba = (await signer.sign({ sessionId: 'ses_abc', actorId: 'gateway:ses_abc', maxAmountMinor: '2', budgetId: `pay_${i}`, rail: 'x402', merchantId: 'merchant-a', purpose: 'api:search', issuer })) as unknown as Record<string, unknown>;
      for (const extra of [{}, { purpose: 'ev:charging' }, { merchant: 'zz-last' }]) {
        const f = fields(i, extra);
        const expected = (await signReceipt({ ...f, sba } as any, { signingKey: receiptKey, keyId: 'rk-1' })) as unknown as Record<string, unknown>;
        const got = await signReceiptPrepared(f, { signingKey: receiptKey, keyId: 'rk-1' }, { sba, grantJcs });
        assert.equal(receiptSignedBytes(got, { sba, grantJcs }), signedBytes('receipt', expected));
        assert.is(got.signature, expected.signature);
        assert.equal(JSON.parse(JSON.stringify(got)), JSON.parse(JSON.stringify(expected)));
        assert.ok((await verifyReceipt(JSON.parse(JSON.stringify(got)), { publicKey })).valid);
      }
    }
  }
});

test('the grant text comes from the caller: a receipt over other grant text does not verify', async () => {
  const { signer, receiptKey, publicKey } = await setup();
  const sba = (await signer.sign({ sessionId: 'ses_abc', actorId: 'a', maxAmountMinor: '2' })) as unknown as Record<string, unknown>;
  const wrongText = canonicalize({ ...signer.grant, maxAmountMinor: '4999' });
  const got = await signReceiptPrepared(fields(0), { signingKey: receiptKey, keyId: 'rk-1' }, { sba, grantJcs: wrongText });
  assert.not.ok((await verifyReceipt(JSON.parse(JSON.stringify(got)), { publicKey })).valid);
});

test("the receipt's own members are still checked on every receipt", async () => {
  const { signer, grantJcs, receiptKey } = await setup();
  const sba = (await signer.sign({ sessionId: 'ses_abc', actorId: 'a', maxAmountMinor: '2' })) as unknown as Record<string, unknown>;
  for (const bad of [{ txRef: 'not-a-txid' }, { receiptId: 'pay_1' }, { amount: { amountMinor: '-1', currency: 'USD' } }, { unknown: 1 }]) {
    await signReceiptPrepared(fields(0, bad), { signingKey: receiptKey, keyId: 'rk-1' }, { sba, grantJcs }).then(
      () => assert.unreachable(`accepted ${JSON.stringify(bad)}`),
      (e) => assert.is(e.code, 'malformed'),
    );
  }
});

test.run();
