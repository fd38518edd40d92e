/**
 * `signReceiptPrepared` (src/artifacts/receipt.ts) over an SBA whose grant is deep-frozen (an
 * `SbaSigner`'s, as the gateway's receipts embed it): the grant is checked and canonicalised once,
 * by object, and every receipt is still byte for byte `signReceipt`'s, signed over
 * `signedBytes('receipt', …)` (PROTOCOL.md §3), its own members and its SBA's authorization checked
 * every time. No grant text is passed in: the SDK takes it from a grant that can change no more.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createSbaSigner } from '../../src/entries/wallet.js';
import {
  formatTimestamp,
  generateKeyPair,
  importSigningKey,
  signReceipt,
  signedBytes,
  verifyReceipt,
  type SigningKey,
} from '../../src/index.js';
import { frozenJsonCopy } from '../../src/encoding/frozen-copy.js';
import { signReceiptPrepared } from '../../src/artifacts/receipt.js';
import { grant, keys } from '../helpers/fixtures.js';

const NOW = Date.UTC(2026, 10, 25, 1, 0, 0);
type Obj = Record<string, any>;

const thaw = (v: unknown): Obj => JSON.parse(JSON.stringify(v));

/** A receipt key that records the bytes it signs. */
async function recordingKey() {
  const rk = await generateKeyPair({ alg: 'EdDSA' });
  const key = await importSigningKey(rk.privateKeyPem);
  const signed: Uint8Array[] = [];
  const recording: SigningKey = {
    kind: 'signing',
    alg: key.alg,
    publicJwk: key.publicJwk,
    sign: (m) => (signed.push(m), key.sign(m)),
  };
  return { key: recording, signed, publicKey: rk.publicJwk };
}

async function setup(over: Obj = {}) {
  const k = await keys();
  const g = await grant(k, over, NOW);
  const signer = await createSbaSigner(g, { signingKey: k.actor.privateKeyPem, now: () => NOW });
  const sbaOf = async (i: number, issuer?: string) =>
    (await signer.sign({
      sessionId: 'ses_abc',
      actorId: 'gateway:ses_abc',
      maxAmountMinor: '2',
      budgetId: `pay_${i}`,
      rail: 'x402',
      merchantId: 'merchant-a',
      purpose: 'api:search',
      issuer,
    })) as unknown as Obj;
  return { signer, sbaOf, ...(await recordingKey()) };
}

const fields = (i: number, over: Obj = {}): Obj => ({
  receiptId: `rcpt_${i}`,
  sessionId: 'ses_abc',
  grantId: 'gr_1',
  purpose: 'api:search',
  amount: { amountMinor: String(1 + i), currency: 'USD' },
  merchant: 'merchant-a',
  paidAt: formatTimestamp(NOW),
  txRef: `txid:${i}`,
  rail: 'ledger',
  ...over,
});

const sign = (f: Obj, key: SigningKey) =>
  signReceiptPrepared(f as never, { signingKey: key, keyId: 'rk-1' }) as unknown as Promise<Obj>;
const sdk = (f: Obj, key: SigningKey) =>
  signReceipt(f as never, { signingKey: key, keyId: 'rk-1' }) as unknown as Promise<Obj>;

/**
 * The same frozen grant behind a proxy that counts reads of its `signature` (canonicalising reads it; an authorization
 * check does not).
 */
function counted(frozen: Obj) {
  const reads = { n: 0 };
  const proxy = new Proxy(frozen, { get: (t, p) => (p === 'signature' && reads.n++, t[p as string]) });
  return { proxy, reads };
}

async function codeOf(p: Promise<unknown>): Promise<string> {
  return p.then(
    () => 'accepted',
    (e) => e.code ?? `${e.name}: ${e.message}`,
  );
}

test(
  'the bytes signed are signedBytes("receipt", receipt) and the signature is signReceipt\'s, ' +
    'across SBAs and members',
  async () => {
    for (const over of [{}, { destinationAllowlist: ['merchant-a', 'a~b\\c', 'q"r'] }]) {
      const { signer, sbaOf, key, signed, publicKey } = await setup(over);
      for (const [i, issuer] of [
        [0, 'authority.test'],
        [1, undefined],
      ] as const) {
        const sba = await sbaOf(i, issuer);
        assert.ok(
          sba.grant === signer.grant && Object.isFrozen(sba.grant.allowedRails),
          "the SBA embeds the signer's frozen grant",
        );
        for (const extra of [
          {},
          { purpose: 'ev:charging' },
          { merchant: 'zz-last' },
          { receiptId: 'rcpt_a.b:c-d', txRef: 'txid:"\\' },
        ]) {
          const f = fields(i, extra);
          const got = await sign({ ...f, sba }, key);
          assert.equal(signed.at(-1), signedBytes('receipt', got));
          const expected = await sdk({ ...f, sba }, key);
          assert.equal(signed.at(-1), signed.at(-2));
          assert.is(got.signature, expected.signature);
          assert.equal(thaw(got), thaw(expected));
          assert.ok((await verifyReceipt(thaw(got), { publicKey })).valid);
        }
      }
    }
    // No SBA: the receipt's own members alone.
    const { key, signed } = await setup();
    const plain = await sign(fields(3), key);
    assert.equal(signed.at(-1), signedBytes('receipt', plain));
  },
);

test('a deep-frozen grant is canonicalised once, by object; any other grant every time', async () => {
  const { signer, sbaOf, key, signed } = await setup();
  const sba = await sbaOf(0);
  // The signer's grant, and another deep-frozen object of the same content (another entry).
  for (const g of [signer.grant as unknown as Obj, frozenJsonCopy(thaw(signer.grant))]) {
    const frozen = counted(g);
    let r = await sign({ ...fields(0), sba: { ...sba, grant: frozen.proxy } }, key);
    assert.ok(frozen.reads.n > 0, 'checked and canonicalised the first time');
    assert.equal(signed.at(-1), signedBytes('receipt', r));
    for (let i = 1; i < 4; i++) {
      const before = frozen.reads.n;
      r = await sign({ ...fields(i), sba: { ...sba, grant: frozen.proxy } }, key);
      assert.is(frozen.reads.n, before, 'and never read whole again');
      assert.equal(signed.at(-1), signedBytes('receipt', r));
    }
  }
  const thawed = counted(thaw(signer.grant));
  for (let i = 0; i < 3; i++) {
    const before = thawed.reads.n;
    const r = await sign({ ...fields(i), sba: { ...sba, grant: thawed.proxy } }, key);
    assert.ok(thawed.reads.n > before, 'a grant that may change is read every time');
    assert.equal(signed.at(-1), signedBytes('receipt', r));
  }
});

test(
  'no grant text can be passed, and none goes stale: a grant frozen only on top, a getter, ' +
    'another grant under the same SBA',
  async () => {
    const { signer, sbaOf, key, signed } = await setup();
    const sba = await sbaOf(0);
    // Frozen on top, its arrays not: an edit between two receipts is in the second one's bytes.
    const shallow = Object.freeze(thaw(signer.grant));
    const r1 = await sign({ ...fields(1), sba: { ...sba, grant: shallow } }, key);
    assert.equal(signed.at(-1), signedBytes('receipt', r1));
    shallow.allowedPurposes.push('ev:parking');
    const r2 = await sign({ ...fields(2), sba: { ...sba, grant: shallow } }, key);
    assert.equal(r2.sba.grant.allowedPurposes.at(-1), 'ev:parking');
    assert.equal(signed.at(-1), signedBytes('receipt', r2));
    // Frozen throughout but one member a getter: not data that can change no more.
    let purposes = Object.freeze(['api:*']);
    const getter = Object.freeze(
      Object.defineProperty({ ...signer.grant }, 'allowedPurposes', { enumerable: true, get: () => purposes }),
    );
    for (const next of [['api:*', 'ev:charging'], ['ev:charging']]) {
      const r = await sign({ ...fields(3), sba: { ...sba, grant: getter } }, key);
      assert.equal(signed.at(-1), signedBytes('receipt', r));
      purposes = Object.freeze(next);
    }
    // The same SBA over different frozen grants in turn: each receipt carries its own grant's text.
    for (const g of [
      signer.grant,
      Object.freeze({ ...signer.grant, allowedPurposes: Object.freeze(['api:*']) }),
      signer.grant,
    ]) {
      const r = await sign({ ...fields(7), sba: { ...sba, grant: g } }, key);
      assert.equal(signed.at(-1), signedBytes('receipt', r));
    }
  },
);

test(
  "a bad receipt member or SBA is refused as signReceipt refuses it, with the grant's " + 'text already kept',
  async () => {
    const { signer, sbaOf, key } = await setup();
    const sba = await sbaOf(0);
    await sign({ ...fields(0), sba }, key); // the grant's text is kept from here on
    const cases: Array<[string, Obj]> = [
      ['malformed', fields(0, { txRef: 'not-a-txid' })],
      ['malformed', fields(0, { receiptId: 'pay_1' })],
      ['malformed', fields(0, { amount: { amountMinor: '-1', currency: 'USD' } })],
      ['malformed', fields(0, { unknown: 1 })],
      ['malformed', fields(0, { merchant: 'a\nb' })],
      ['unsupported_version', fields(0, { version: 2 })],
      ['malformed', fields(0, { sba: { ...sba, keyId: 'not an id' } })],
      ['malformed', fields(0, { sba: { ...sba, issuer: 'someone.else' } })],
      ['malformed', fields(0, { sba: { ...sba, authorization: { ...sba.authorization, extra: 1 } } })],
      [
        'malformed',
        fields(0, { sba: { ...sba, authorization: { ...sba.authorization, destinationAllowlist: ['merchant-a'] } } }),
      ],
      [
        'budget_exceeded',
        fields(0, { sba: { ...sba, authorization: { ...sba.authorization, maxAmountMinor: '5001' } } }),
      ],
      ['malformed', fields(0, { sba: { ...sba, signature: undefined } })],
    ];
    for (const [code, f] of cases) {
      const withSba = 'sba' in f ? f : { ...f, sba };
      assert.is(await codeOf(sign(withSba, key)), code, JSON.stringify(f).slice(0, 120));
      assert.is(await codeOf(sdk(withSba, key)), code, 'as signReceipt refuses it');
    }
    assert.ok(signer.grant === sba.grant);
  },
);

test('the key must be imported already; the keyId is required', async () => {
  const { sbaOf } = await setup();
  const rk = await generateKeyPair({ alg: 'EdDSA' });
  const f = { ...fields(0), sba: await sbaOf(0) };
  await signReceiptPrepared(f as never, { signingKey: rk.privateKeyPem as never, keyId: 'rk-1' }).then(
    () => assert.unreachable(),
    (e) => assert.instance(e, TypeError),
  );
  assert.is(
    await codeOf(signReceiptPrepared(f as never, { signingKey: await importSigningKey(rk.privateKeyPem) } as never)),
    'malformed',
  );
});

test('a frozen grant that fails its checks is refused every time, never kept', async () => {
  const { signer, sbaOf, key } = await setup();
  const sba = await sbaOf(0);
  const bad = Object.freeze({ ...signer.grant, allowedPurposes: Object.freeze(['not a purpose']) });
  for (let i = 0; i < 2; i++)
    assert.is(await codeOf(sign({ ...fields(i), sba: { ...sba, grant: bad } }, key)), 'malformed');
});

test(
  'an SBA whose grant getter answers differently on a second read: the grant checked ' +
    'is the grant signed over and kept',
  async () => {
    const { signer, sbaOf, key, signed } = await setup();
    const sba = await sbaOf(0);
    const bad = Object.freeze({
      ...signer.grant,
      allowedPurposes: Object.freeze(['not a purpose']),
      evil: 'unchecked',
    });
    let reads = 0;
    const sneaky = { ...sba };
    Object.defineProperty(sneaky, 'grant', { enumerable: true, get: () => (reads++ === 0 ? bad : signer.grant) });
    const before = signed.length;
    assert.is(
      await codeOf(sign({ ...fields(0), sba: sneaky }, key)),
      'malformed',
      'the grant it read first is the one checked',
    );
    assert.is(signed.length, before, 'nothing signed');
    // And the unchecked grant was not kept: as plain data it is refused as signReceipt refuses it.
    assert.is(await codeOf(sign({ ...fields(1), sba: { ...sba, grant: bad } }, key)), 'malformed');
    assert.is(await codeOf(sdk({ ...fields(1), sba: { ...sba, grant: bad } }, key)), 'malformed');
  },
);

test(
  'a receipt for a hold carries authorizedAmountMinor, never below what was captured ' + '(PROTOCOL.md §15)',
  async () => {
    const { key } = await setup();
    const held = (amountMinor: string) =>
      codeOf(sdk(fields(0, { amount: { amountMinor, currency: 'USD' }, authorizedAmountMinor: '3000' }), key));
    assert.is(await held('1234'), 'accepted');
    assert.is(await held('3000'), 'accepted');
    assert.is(await held('3001'), 'malformed');
    assert.is(await codeOf(sdk(fields(0, { authorizedAmountMinor: '12.5' }), key)), 'malformed');
  },
);

test.run();
