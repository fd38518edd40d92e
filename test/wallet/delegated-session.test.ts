import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  createMemorySpendStorage,
  createSession,
  generateKeyPair,
  verifyCtl,
  CtlBudgetExceededError,
  CtlGrantRevokedError,
  type Delegation,
  type WalletSession,
  linkRevocationId,
} from '../../src/index.js';
import { createDelegation as walletCreateDelegation } from '../../src/entries/wallet.js';
import { keys, grant, bundle, fakeAuthority, T0, type Keys } from '../helpers/fixtures.js';
import { chain } from '../helpers/delegation-fixtures.js';

let k: Keys;
test.before(async () => {
  k = await keys();
});

const pay = { amount: '10', currency: 'USD', rail: 'x402', merchantId: 'merchant-a', purpose: 'api:search' };

test('session.delegate hands a narrower slice; the sub-agent pays under it and a verifier accepts', async () => {
  const root = await grant(k, { delegation: { maxDepth: 2 } });
  const a = fakeAuthority(k);
  const agent = createSession(root, {
    actorId: 'planner',
    signingKey: k.actor.privateKeyPem,
    fetch: a.fetch,
    now: () => T0,
  });
  const sub = await generateKeyPair();
  const d = await agent.delegate({
    actorKey: sub.publicJwk,
    maxAmountMinor: '500',
    expiresAt: root.expiresAt,
    allowedPurposes: ['api:search'],
  });
  assert.equal(d.allowedRails, root.allowedRails, 'lists the parent restricts are inherited when unset');
  const s = createSession(d, { actorId: 'hotel-agent', signingKey: sub.privateKeyPem, fetch: a.fetch, now: () => T0 });
  const sba = await s.createSba(pay);
  assert.is(sba.authorization.grantId, d.delegationId);
  const r = await verifyCtl(sba, {
    amount: '10',
    currency: 'USD',
    now: () => T0,
    signingKeyPem: k.authority.publicKeyPem,
    fetch: a.fetch,
  });
  assert.ok(r.valid, JSON.stringify(!r.valid && r.error));
  try {
    await s.createSba({ ...pay, purpose: 'api:book' });
    assert.unreachable();
  } catch (e) {
    assert.is((e as { code: string }).code, 'purpose_not_allowed');
  }
  assert.is(typeof walletCreateDelegation, 'function', 'ctl/wallet exports createDelegation');
});

test('two sibling wallets racing 200 payments on one storage never pass their parent, nor the root', async () => {
  const root = await grant(k, { delegation: { maxDepth: 2 }, maxAmountMinor: '5000' });
  const a = fakeAuthority(k);
  const mid = await generateKeyPair();
  const storage = createMemorySpendStorage();
  const parentSession = createSession(root, {
    actorId: 'a',
    signingKey: k.actor.privateKeyPem,
    fetch: a.fetch,
    now: () => T0,
    spendStorage: storage,
  });
  const parent = await parentSession.delegate({
    actorKey: mid.publicJwk,
    maxAmountMinor: '1000',
    expiresAt: root.expiresAt,
  });
  const mids = createSession(parent, { actorId: 'm', signingKey: mid.privateKeyPem, fetch: a.fetch, now: () => T0 });
  const sibs = await Promise.all([generateKeyPair(), generateKeyPair()]);
  const sessions: WalletSession<Delegation>[] = [];
  for (const s of sibs) {
    const d = await mids.delegate({ actorKey: s.publicJwk, maxAmountMinor: '800', expiresAt: root.expiresAt });
    sessions.push(
      createSession(d, {
        actorId: 's',
        signingKey: s.privateKeyPem,
        fetch: a.fetch,
        now: () => T0,
        spendStorage: storage,
      }),
    );
  }
  const results = await Promise.allSettled(Array.from({ length: 200 }, (_, i) => sessions[i % 2]!.createSba(pay)));
  const ok = results.filter((r) => r.status === 'fulfilled').length;
  assert.is(ok, 100);
  for (const r of results) if (r.status === 'rejected') assert.instance(r.reason, CtlBudgetExceededError);
  assert.is(await storage.total(`wallet:${root.grantId}`), 1000n);
  assert.is((await sessions[0]!.remaining()).remainingMinor, '0');
});

test('a revoked middle link stops the leaf wallet online and offline (bundles)', async () => {
  const c = await chain(k, 3);
  const a = fakeAuthority(k);
  const s = createSession(c.leaf, {
    actorId: 'leaf',
    signingKey: c.holders[3]!.privateKeyPem,
    fetch: a.fetch,
    now: () => T0,
    revocationTtl: 0,
  });
  await s.createSba(pay);
  // A bare delegation id revokes nothing (any delegator may copy it); the link's revocation id does.
  a.revoke('dlg-2');
  await s.createSba(pay);
  a.revoke(linkRevocationId(c.links[1]!));
  try {
    await s.createSba(pay);
    assert.unreachable();
  } catch (e) {
    assert.instance(e, CtlGrantRevokedError);
  }
  const b = await bundle(k, { revokedGrants: ['dlg-2', linkRevocationId(c.links[1]!)] });
  const off = createSession(c.leaf, {
    actorId: 'leaf',
    signingKey: c.holders[3]!.privateKeyPem,
    now: () => T0,
    revocationFromBundles: { trustBundles: [b], rootPublicKeyPem: k.root.publicKeyPem },
  });
  try {
    await off.createSba(pay);
    assert.unreachable();
  } catch (e) {
    assert.instance(e, CtlGrantRevokedError);
  }
});

test.run();
