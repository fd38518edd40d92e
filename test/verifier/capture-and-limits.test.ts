/**
 * One rule, one answer, on every entry: a Trust Bundle object is read to one member limit by
 * `verifyTrustBundle` and `verifyCtl`; a window above its link's own ceiling widens the link
 * (`delegation_invalid`, PROTOCOL.md §14); `ctl/edge` captures as `ctl` does; a capture reads
 * time as its verification did; a hold accepted before a revocation is captured after it (§15).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as CTL from '../../src/index.js';
import * as Edge from '../../src/edge.js';
import * as VerifyEntry from '../../src/entries/verify.js';
import { MAX_BUNDLE_MEMBERS } from '../../src/encoding/frozen-copy.js';
import { keys, grant, bundle, fakeAuthority, T0, HOUR, type Keys } from '../helpers/fixtures.js';
import { rawDelegation } from '../helpers/delegation-fixtures.js';
import { windowedChain } from '../helpers/windowed-chain.js';
import { createKvSpendStorage } from '../../firmware-bridge/kv-spend-storage.js';
import { createMemoryByteStorage } from '../../firmware-bridge/abi.js';

let k: Keys;
test.before(async () => {
  k = await keys();
});

test('a bundle object of more than 10,000 members: accepted by verifyTrustBundle and verifyCtl alike', async () => {
  const revoked = Array.from({ length: 12_000 }, (_, i) => `grant_old_${i}`);
  const b = await bundle(k, { revokedGrants: revoked });
  const g = await grant(k);
  const sba = await CTL.createSession(g, {
    actorId: 'a',
    signingKey: k.actor.privateKeyPem,
    fetch: fakeAuthority(k).fetch,
    now: () => T0,
  }).createSba({ amount: '10', currency: 'USD', rail: 'x402', merchantId: 'merchant-a' });
  const o = { amount: '10', currency: 'USD', offline: true, rootPublicKeyPem: k.root.publicKeyPem, now: () => T0 };
  const verdicts = {
    verifyTrustBundle: (await CTL.verifyTrustBundle(b, k.root.publicKeyPem, { now: () => T0 })).valid,
    'ctl/verify verifyTrustBundle': (await VerifyEntry.verifyTrustBundle(b, k.root.publicKeyPem, { now: () => T0 }))
      .valid,
    verifyTrustBundleEdge: (await Edge.verifyTrustBundleEdge(b, k.root.publicKeyPem, { now: () => T0 })).valid,
    verifyCtl: (await CTL.verifyCtl(sba, { ...o, trustBundles: [b] })).valid,
    verifyCtlEdge: (await Edge.verifyCtlEdge(sba, { ...o, trustBundles: [b] })).valid,
  };
  assert.equal(Object.values(verdicts), [true, true, true, true, true], JSON.stringify(verdicts));
});

test('a bundle object past the one member limit: refused by verifyTrustBundle and verifyCtl alike', async () => {
  const b = { ...(await bundle(k)), revokedGrants: new Array(MAX_BUNDLE_MEMBERS).fill('g') };
  const t = await CTL.verifyTrustBundle(b, k.root.publicKeyPem, { now: () => T0 });
  assert.is(!t.valid && t.error.code, 'malformed');
  const g = await grant(k);
  const sba = await CTL.createSession(g, {
    actorId: 'a',
    signingKey: k.actor.privateKeyPem,
    fetch: fakeAuthority(k).fetch,
    now: () => T0,
  }).createSba({ amount: '10', currency: 'USD', rail: 'x402' });
  const r = await CTL.verifyCtl(sba, {
    amount: '10',
    currency: 'USD',
    offline: true,
    trustBundles: [b],
    rootPublicKeyPem: k.root.publicKeyPem,
    now: () => T0,
  });
  assert.is(r.valid, false, 'the bundle vouches for nothing');
});

test("a window above its link's own ceiling is delegation_invalid on every verifier", async () => {
  const root = await grant(k, { delegation: { maxDepth: 2 } });
  const holder = await CTL.generateKeyPair();
  const link = await rawDelegation(root, k.actor, {
    actorKey: holder.publicJwk,
    maxAmountMinor: '500',
    windows: [{ every: 'P1D', maxAmountMinor: '600' }],
  });
  const d = await CTL.verifyDelegation(link, { now: () => T0 });
  assert.is(!d.valid && d.error.code, 'delegation_invalid', JSON.stringify(d));
  const sba = await CTL.createSignedSessionBudgetAuthorization(
    { grant: link, sessionId: 's1', actorId: 'sub', maxAmountMinor: '10', rail: 'x402' },
    { signingKey: holder.privateKeyPem, now: () => T0 },
  ).catch((e: CTL.CtlError) => e);
  assert.ok(sba instanceof CTL.CtlError && sba.code === 'delegation_invalid', String(sba));
  let code = '';
  try {
    await CTL.createDelegation(
      root,
      {
        actorKey: holder.publicJwk,
        maxAmountMinor: '500',
        expiresAt: root.expiresAt,
        windows: [{ every: 'P1D', maxAmountMinor: '600' }],
      },
      { signingKey: k.actor.privateKeyPem, now: () => T0 },
    );
  } catch (e) {
    code = (e as CTL.CtlError).code;
  }
  assert.is(code, 'delegation_invalid', 'the signer refuses it the same way');
  const g = await grant(k, { windows: [{ every: 'P1D', maxAmountMinor: '6000' }] }).catch((e: CTL.CtlError) => e);
  assert.ok(
    g instanceof CTL.CtlError && g.code === 'malformed',
    "a grant's own window above its ceiling stays malformed",
  );
});

test('ctl/edge exports a typed captureCtl: a hold verified there is captured by its storage and clock', async () => {
  const g = await grant(k);
  const capture: CTL.CaptureCtl = Edge.captureCtl;
  const hold = await CTL.createSession(g, {
    actorId: 'a',
    signingKey: k.actor.privateKeyPem,
    fetch: fakeAuthority(k).fetch,
    now: () => T0,
  }).createSba({ amount: '3000', currency: 'USD', rail: 'x402', hold: true });
  const spendStorage = CTL.createMemorySpendStorage();
  const now = () => T0 + 60_000; // the verifier's clock, far from the host's
  const v = await Edge.verifyCtlEdge(hold, {
    amount: '3000',
    currency: 'USD',
    offline: true,
    signingKeyPem: k.authority.publicKeyPem,
    spendStorage,
    now,
  });
  assert.ok(v.valid && v.holdId, JSON.stringify(v));
  assert.equal(await capture(v.valid ? v.holdId! : '', '1234', { spendStorage, now }), {
    captured: true,
    amountMinor: '1234',
  });
  // A capture reads time as it is told to: given the host's clock (past the SBA), it is too late.
  const hold2 = await CTL.createSession(g, {
    actorId: 'a',
    signingKey: k.actor.privateKeyPem,
    fetch: fakeAuthority(k).fetch,
    now: () => T0,
  }).createSba({ amount: '1000', currency: 'USD', rail: 'x402', hold: true });
  const v2 = await Edge.verifyCtlEdge(hold2, { ...opts(spendStorage, now), amount: '1000' });
  assert.ok(v2.valid, JSON.stringify(v2));
  const late = await capture(hold2, '1', { spendStorage, now: () => Date.parse(hold2.authorization.expiresAt) });
  assert.is(!late.captured && late.error.code, 'hold_expired');
});

const opts = (spendStorage: CTL.SpendStorage, now: () => number) => ({
  amount: '0',
  currency: 'USD',
  offline: true,
  signingKeyPem: k.authority.publicKeyPem,
  spendStorage,
  now,
});

test('a hold accepted before its grant was revoked is captured after the revocation', async () => {
  const g = await grant(k);
  const authority = fakeAuthority(k);
  const wallet = CTL.createSession(g, {
    actorId: 'a',
    signingKey: k.actor.privateKeyPem,
    fetch: authority.fetch,
    now: () => T0,
    revocationTtl: 0,
  });
  const hold = await wallet.createSba({ amount: '3000', currency: 'USD', rail: 'x402', hold: true });
  const spendStorage = CTL.createMemorySpendStorage();
  const o = {
    amount: '3000',
    currency: 'USD',
    trackSpend: true,
    jwks: {
      keys: [{ ...k.authority.publicJwk, kid: k.authorityKid, alg: 'EdDSA' as const, purposes: ['grant' as const] }],
    },
    fetch: authority.fetch,
    revocationTtl: 0,
    spendStorage,
    now: () => T0,
  };
  const v = await CTL.verifyCtl(hold, o);
  assert.ok(v.valid, JSON.stringify(v));
  authority.revoke(g.grantId);
  const next = await wallet.createSba({ amount: '1', currency: 'USD', rail: 'x402' }).catch((e: CTL.CtlError) => e);
  assert.ok(next instanceof CTL.CtlError && next.code === 'grant_revoked', 'no new payment after the revocation');
  const c = await CTL.captureCtl(hold, '2500', { spendStorage, now: () => T0 + HOUR / 60 });
  assert.equal(c, { captured: true, amountMinor: '2500' }, 'the goods were delivered under a valid authorization');
});

test('the decision verifier names the hold it accepted; captureCtl captures it on the same storage', async () => {
  const g = await grant(k);
  const hold = await CTL.createSession(g, {
    actorId: 'a',
    signingKey: k.actor.privateKeyPem,
    fetch: fakeAuthority(k).fetch,
    now: () => T0,
    sessionId: 'sess_dec',
  }).createSba({ amount: '3000', currency: 'USD', rail: 'x402', hold: true });
  const spendStorage = CTL.createMemorySpendStorage();
  const r = await CTL.verifySignedSessionBudgetAuthorizationForDecision(hold, {
    sessionId: 'sess_dec',
    decision: {
      action: 'ALLOW',
      policyHash: g.policyHash,
      expiresAtISO: CTL.formatTimestamp(T0 + HOUR),
      decisionId: 'dec_1',
      sessionGrantId: g.grantId,
      priceFiat: { amountMinor: '3000', currency: 'USD' },
    },
    offline: true,
    signingKeyPem: k.authority.publicKeyPem,
    spendStorage,
    now: () => T0,
  });
  assert.ok(r.ok && r.holdId, JSON.stringify(r));
  const c = await CTL.captureCtl(r.ok ? r.holdId! : '', '100', { spendStorage, now: () => T0 });
  assert.equal(c, { captured: true, amountMinor: '100' });
});

test('a hold under a chain is named by its chain: captured by holdId or by the SBA, on memory and flash', async () => {
  const fx = await windowedChain(CTL);
  for (const spendStorage of [CTL.createMemorySpendStorage(), createKvSpendStorage(createMemoryByteStorage())]) {
    const at = Date.parse(fx.link.issuedAt) + HOUR;
    const hold = await fx.sba('5000', at, HOUR, { hold: true });
    const o = {
      amount: '5000',
      currency: 'EUR',
      offline: true,
      trustBundles: [fx.bundle],
      rootPublicKeyPem: fx.root.publicKeyPem,
      spendStorage,
      now: () => at,
    };
    const v = await CTL.verifyCtl(hold, o);
    assert.ok(v.valid, JSON.stringify(v));
    const holdId = v.valid ? v.holdId! : '';
    assert.match(holdId, new RegExp(`^grant:${fx.grant.grantId}#[0-9a-f]{32}\\|${hold.authorization.budgetId}$`));
    const window = `window:grant:${fx.grant.grantId}/dlg-hourly:PT1H:1`;
    assert.is(await spendStorage.total(window), 5000n, "the link's hour holds the maximum");
    assert.equal(await CTL.captureCtl(hold, '1200', { spendStorage, now: () => at }), {
      captured: true,
      amountMinor: '1200',
    });
    assert.is(await spendStorage.total(window), 1200n, 'the rest went back to the link');
    const again = await CTL.captureCtl(holdId, '1', { spendStorage, now: () => at });
    assert.is(!again.captured && again.error.code, 'replay');
  }
});

test.run();
