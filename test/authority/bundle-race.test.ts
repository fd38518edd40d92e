/**
 * Trust Bundle issuance is one unit per scope (store.issueBundle): a bundle with a higher
 * sequence never carries fewer revocations, nor older keys, than an earlier one of the same
 * scope, however the requests interleave; on SQLite, on PostgreSQL, and across two authority
 * instances on one PostgreSQL schema (review: a delayed root signer between two POST
 * /trust-bundles with a revocation in between let sequence 2 miss the revocation sequence 1 had).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { generateKeyPair, type SigningKey } from '../../src/index.js';
import { grantRequest, startTestAuthority, type TestAuthority } from './harness.js';
import { PG_URL, dropSchema, freshSchema, pgAvailable } from '../service-kit/pg-fixture.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const expiresAt = () => new Date(Date.now() + 86_400_000).toISOString();

/** The next call of `t`'s keys.rootSigner() is slowed by `ms` (restored after it). */
function slowRootSignerOnce(t: TestAuthority, ms: number): void {
  const keys = t.authority.keys;
  const orig = keys.rootSigner;
  keys.rootSigner = async () => {
    keys.rootSigner = orig;
    await sleep(ms);
    return orig.call(keys);
  };
}

/** The next signature by `t`'s root key takes `ms` longer (the signing itself is slow). */
function slowRootSignatureOnce(t: TestAuthority, ms: number): void {
  const keys = t.authority.keys;
  const orig = keys.rootSigner;
  keys.rootSigner = async () => {
    keys.rootSigner = orig;
    const root = await orig.call(keys);
    const s = root.signer;
    const slow: SigningKey = {
      kind: 'signing',
      alg: s.alg,
      publicJwk: s.publicJwk,
      sign: async (m) => (await sleep(ms), s.sign(m)),
    };
    return { ...root, signer: slow };
  };
}

type Bundle = { sequence: number; revokedGrants: string[]; issuers: Array<{ keys: Array<{ kid: string }> }> };

/** Every bundle of a higher sequence carries every revocation and key of the lower ones. */
function assertMonotonic(bundles: Bundle[]): void {
  const sorted = [...bundles].sort((x, y) => x.sequence - y.sequence);
  for (let i = 1; i < sorted.length; i++) {
    assert.ok(sorted[i].sequence > sorted[i - 1].sequence, 'sequences are distinct');
    for (const g of sorted[i - 1].revokedGrants) {
      assert.ok(
        sorted[i].revokedGrants.includes(g),
        `sequence ${sorted[i].sequence} lost revocation ${g} that ${sorted[i - 1].sequence} carried`,
      );
    }
  }
}

async function newGrant(t: TestAuthority): Promise<string> {
  const wallet = await generateKeyPair({ alg: 'EdDSA' });
  const r = await t.call('POST', '/grants', await grantRequest(t, wallet.publicJwk));
  assert.is(r.status, 201, JSON.stringify(r.body));
  return r.body.grantId as string;
}

/**
 * The reviewer's race: A's root signer is slow (before the fix, between its revocation read and
 * its sequence); a revocation and bundle B land meanwhile. The higher sequence must carry it.
 */
async function reviewerRace(slow: TestAuthority, fast: TestAuthority, region: string): Promise<void> {
  const grantId = await newGrant(fast);
  slowRootSignerOnce(slow, 300);
  const A = slow.call('POST', '/trust-bundles', { scope: { region }, expiresAt: expiresAt() });
  await sleep(50);
  assert.is((await fast.call('POST', '/revoke', { grantId, reason: 'stolen' })).status, 200);
  const b = await fast.call('POST', '/trust-bundles', { scope: { region }, expiresAt: expiresAt() });
  const a = await A;
  assert.is(a.status, 201, JSON.stringify(a.body));
  assert.is(b.status, 201, JSON.stringify(b.body));
  assertMonotonic([a.body, b.body]);
  const newest = a.body.sequence > b.body.sequence ? a.body : b.body;
  assert.ok(newest.revokedGrants.includes(grantId), 'the newest bundle carries the revocation');
  const served = (await fast.call('GET', `/trust-bundles?region=${region}`, undefined, null)).body.bundles as Bundle[];
  assert.is(served.length, 1);
  assert.is(served[0].sequence, newest.sequence);
  assert.ok(served[0].revokedGrants.includes(grantId), 'the served bundle carries the revocation');
}

/**
 * A's signature itself is slow (inside the unit): a revocation and a grant-key rotation land
 * meanwhile, then bundle B. B waits for A, takes the next sequence, and carries both.
 */
async function slowSignature(slow: TestAuthority, fast: TestAuthority, region: string): Promise<void> {
  const grantId = await newGrant(fast);
  slowRootSignatureOnce(slow, 300);
  const A = slow.call('POST', '/trust-bundles', { scope: { region }, expiresAt: expiresAt() });
  await sleep(50);
  const [revoked, rotated] = await Promise.all([
    fast.call('POST', '/revoke', { grantId, reason: 'stolen' }),
    fast.call('POST', '/admin/keys/rotate'),
  ]);
  assert.is(revoked.status, 200);
  assert.is(rotated.status, 201, JSON.stringify(rotated.body));
  const b = await fast.call('POST', '/trust-bundles', { scope: { region }, expiresAt: expiresAt() });
  const a = await A;
  assert.is(a.status, 201, JSON.stringify(a.body));
  assert.is(b.status, 201, JSON.stringify(b.body));
  assertMonotonic([a.body, b.body]);
  assert.is(b.body.sequence, a.body.sequence + 1, 'B was issued after A');
  assert.ok(b.body.revokedGrants.includes(grantId));
  const kids = b.body.issuers[0].keys.map((k: { kid: string }) => k.kid);
  assert.ok(kids.includes(rotated.body.kid), 'the later bundle publishes the rotated-in key');
}

/** Many concurrent issues of one scope, revocations interleaved: sequences 1..n, monotonic. */
async function storm(ts: TestAuthority[], region: string): Promise<void> {
  const grants = await Promise.all(Array.from({ length: 6 }, (_, i) => newGrant(ts[i % ts.length])));
  const issues: Array<Promise<{ status: number; body: any }>> = [];
  for (let i = 0; i < 12; i++) {
    issues.push(ts[i % ts.length].call('POST', '/trust-bundles', { scope: { region }, expiresAt: expiresAt() }));
    if (i % 2 === 1) void ts[(i + 1) % ts.length].call('POST', '/revoke', { grantId: grants[(i - 1) / 2] });
  }
  const out = await Promise.all(issues);
  for (const r of out) assert.is(r.status, 201, JSON.stringify(r.body));
  const bundles = out.map((r) => r.body as Bundle);
  assert.equal(
    bundles.map((b) => b.sequence).sort((x, y) => x - y),
    Array.from({ length: 12 }, (_, i) => i + 1),
  );
  assertMonotonic(bundles);
}

// SQLite: one instance.
{
  let t: TestAuthority;
  test.before(async () => {
    t = await startTestAuthority();
  });
  test.after(async () => {
    await t?.close();
  });
  test('SQLite: a slow root signer between two issues: the higher sequence carries the revocation', async () => {
    await reviewerRace(t, t, 'sq1');
  });
  test(
    'SQLite: a slow signature holds the scope: the next bundle carries the revocation ' + 'and the rotated key',
    async () => {
      await slowSignature(t, t, 'sq2');
    },
  );
  test('SQLite: concurrent issues with revocations: sequences 1..n, revocations never lost', async () => {
    await storm([t], 'sq3');
  });
}

// PostgreSQL: two instances on one schema.
const available = await pgAvailable();
if (!available) {
  console.log(`SKIPPED bundle race on PostgreSQL: ${PG_URL} is unreachable`);
} else {
  const schema = freshSchema();
  let a: TestAuthority;
  let b: TestAuthority;
  test.before(async () => {
    a = await startTestAuthority({ databaseUrl: PG_URL, schema });
    b = await startTestAuthority({ databaseUrl: PG_URL, schema });
  });
  test.after(async () => {
    await a?.close();
    await b?.close();
    await dropSchema(schema);
  });
  test('PostgreSQL, one instance: a slow root signer: the higher sequence carries the revocation', async () => {
    await reviewerRace(a, a, 'pg1');
  });
  test('PostgreSQL, two instances: a slow root signer on A, revocation and bundle through B', async () => {
    await reviewerRace(a, b, 'pg2');
  });
  test('PostgreSQL, two instances: a slow signature on A holds the scope for B too', async () => {
    await slowSignature(a, b, 'pg3');
  });
  test(
    'PostgreSQL, two instances: concurrent issues with revocations: sequences 1..n, revocations ' + 'never lost',
    async () => {
      await storm([a, b], 'pg4');
    },
  );
}

test.run();
