/**
 * Hostile inputs against delegation chains (PROTOCOL.md §14): members nobody signed for, an SBA
 * claiming more than its leaf allows, a swapped parent, broken clocks, chains nested past any limit.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  createMemorySpendStorage,
  createSession,
  formatTimestamp,
  generateKeyPair,
  verifyCtl,
  verifyDelegation,
  type Delegation,
  type SignedBudgetAuthorization,
} from '../../src/index.js';
import { signArtifact } from '../../src/artifacts/signing.js';
import { defaultCrypto } from '../../src/crypto/index.js';
import { keys, grant, fakeAuthority, T0, HOUR, type Keys } from '../helpers/fixtures.js';
import { chain, rawDelegation, sbaUnder } from '../helpers/delegation-fixtures.js';

let k: Keys;
test.before(async () => {
  k = await keys();
});

const opts = (extra: Record<string, unknown> = {}) => ({
  amount: '30',
  currency: 'USD',
  merchantId: 'merchant-a',
  now: () => T0,
  signingKeyPem: k.authority.publicKeyPem,
  fetch: fakeAuthority(k).fetch,
  spendStorage: createMemorySpendStorage(),
  ...extra,
});

const code = (r: { valid: boolean; error?: { code: string } }) => (r.valid ? 'valid' : r.error!.code);

/** Re-signs an SBA's authorization as given, with the leaf holder's key: what a hostile sub-agent can send. */
async function resigned(sba: SignedBudgetAuthorization<any>, key: string, edit: (a: any) => void) {
  const copy = JSON.parse(JSON.stringify(sba));
  edit(copy.authorization);
  delete copy.signature;
  return signArtifact(defaultCrypto, 'sba', copy, key);
}

test('an unknown member in a link, or in a parent inside it, is malformed', async () => {
  const c = await chain(k, 2);
  const h = await generateKeyPair();
  const extra = await rawDelegation(c.leaf, c.holders[2]!, { actorKey: h.publicJwk, note: 'x' });
  assert.is(code(await verifyDelegation(extra, { now: () => T0 })), 'malformed');
  const mid = JSON.parse(JSON.stringify(c.links[0])) as Delegation & { note?: string };
  mid.note = 'x';
  const below = await rawDelegation(mid as Delegation, c.holders[1]!, { actorKey: h.publicJwk });
  assert.is(code(await verifyDelegation(below, { now: () => T0 })), 'malformed');
  assert.is(code(await verifyCtl(await sbaUnder(k, below, h).catch(() => null), opts())), 'malformed');
});

test("an SBA under a leaf claims neither the root's id, nor lists wider than the leaf's", async () => {
  const c = await chain(k, 1);
  const h = await generateKeyPair();
  const leaf = await rawDelegation(c.root, k.actor, {
    actorKey: h.publicJwk,
    delegationId: 'dlg-narrow',
    allowedRails: ['x402'],
    destinationAllowlist: ['merchant-a'],
    allowedPurposes: ['api:search'],
  });
  const sba = await sbaUnder(k, leaf, h);
  assert.is(code(await verifyCtl(sba, opts())), 'valid');
  const asRoot = await resigned(sba, h.privateKeyPem, (a) => (a.grantId = c.root.grantId));
  assert.is(code(await verifyCtl(asRoot, opts())), 'malformed');
  const wider = await resigned(sba, h.privateKeyPem, (a) => (a.allowedRails = c.root.allowedRails));
  assert.is(code(await verifyCtl(wider, opts())), 'malformed');
  const elsewhere = await resigned(sba, h.privateKeyPem, (a) => (a.merchantId = 'merchant-b'));
  assert.is(code(await verifyCtl(elsewhere, opts({ merchantId: undefined }))), 'destination_not_allowed');
  const otherPurpose = await resigned(sba, h.privateKeyPem, (a) => (a.purpose = 'api:other'));
  assert.is(code(await verifyCtl(otherPurpose, opts())), 'purpose_not_allowed');
  const otherRail = await resigned(
    sba,
    h.privateKeyPem,
    (a) => (a.rail = c.root.allowedRails.find((r) => r !== 'x402')),
  );
  if (c.root.allowedRails.length > 1) assert.is(code(await verifyCtl(otherRail, opts())), 'rail_not_allowed');
});

test('a parent swapped for another signed by the same key breaks the leaf and the SBA', async () => {
  const c = await chain(k, 2);
  const twin = await rawDelegation(c.root, k.actor, {
    actorKey: c.links[0]!.actorKey,
    delegationId: 'dlg-1',
    maxAmountMinor: '4999',
  });
  const swapped = JSON.parse(JSON.stringify(c.leaf)) as Delegation;
  swapped.parent = twin;
  assert.is(code(await verifyDelegation(swapped, { now: () => T0 })), 'delegation_invalid');
  const sba = await sbaUnder(k, c.leaf, c.holders[2]!);
  const moved = JSON.parse(JSON.stringify(sba));
  moved.grant.parent = twin;
  assert.ok(['delegation_invalid', 'sba_signature_invalid'].includes(code(await verifyCtl(moved, opts()))));
});

test('a clock or tolerance that is not a finite number is malformed, never "no check"', async () => {
  const c = await chain(k, 1);
  for (const now of [() => NaN, () => Infinity, () => 'x' as unknown as number])
    assert.is(code(await verifyDelegation(c.leaf, { now })), 'malformed');
  assert.is(code(await verifyDelegation(c.leaf, { now: () => T0, clockToleranceMs: Infinity })), 'malformed');
  assert.is(code(await verifyDelegation(c.leaf, { now: () => T0, clockToleranceMs: NaN })), 'malformed');
});

test('a chain nested far past maxDepth is refused at once, without a stack overflow', async () => {
  const c = await chain(k, 1);
  let node: Record<string, unknown> = c.leaf as unknown as Record<string, unknown>;
  for (let i = 0; i < 100_000; i++) node = { ...(c.leaf as object), delegationId: `d${i}`, parent: node };
  const r = await verifyDelegation(node, { now: () => T0 });
  assert.ok(['delegation_invalid', 'malformed'].includes(code(r)), JSON.stringify(r));
  const sba = JSON.parse(JSON.stringify(await sbaUnder(k, c.leaf, c.holders[1]!)));
  sba.grant = node;
  const v = await verifyCtl(sba, opts());
  assert.ok(['delegation_invalid', 'malformed'].includes(code(v)), JSON.stringify(v));
});

test("a link's windows counted from another start never lift its parent's window", async () => {
  const root = await grant(k, { delegation: { maxDepth: 2 } });
  const midKey = await generateKeyPair();
  const mid = await rawDelegation(root, k.actor, {
    actorKey: midKey.publicJwk,
    delegationId: 'mid',
    windows: [{ every: 'P1D', maxAmountMinor: '100' }],
    windowsStart: formatTimestamp(T0 - 1000),
  });
  const leafKey = await generateKeyPair();
  const leaf = await rawDelegation(mid, midKey, {
    actorKey: leafKey.publicJwk,
    delegationId: 'leaf',
    windows: [{ every: 'P1D', maxAmountMinor: '100' }],
    windowsStart: formatTimestamp(T0 + 12 * HOUR),
  });
  const storage = createMemorySpendStorage();
  const pay = async (at: number) => {
    const s = createSession(leaf, {
      actorId: 'leaf',
      signingKey: leafKey.privateKeyPem,
      now: () => at,
      fetch: fakeAuthority(k).fetch,
    });
    const sba = await s.createSba({ amount: '100', currency: 'USD', rail: 'x402', merchantId: 'merchant-a' });
    return verifyCtl(sba, opts({ amount: '100', now: () => at, trackSpend: true, spendStorage: storage }));
  };
  assert.is(code(await pay(T0 + 11 * HOUR)), 'valid');
  // The leaf's window has turned; its parent's day has not.
  assert.is(code(await pay(T0 + 13 * HOUR)), 'window_exceeded');
});

test.run();
