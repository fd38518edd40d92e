/**
 * Two authority instances (separate pools, separate key rings, separate ports: two processes in
 * all but pid) on one PostgreSQL schema serve the same grants, revocations, keys and bundle
 * sequences.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createSession, generateKeyPair, verifyCtl } from '../../src/index.js';
import { grantRequest, startTestAuthority, type TestAuthority } from './harness.js';
import { PG_URL, dropSchema, freshSchema, pgAvailable } from '../service-kit/pg-fixture.js';
import pg from 'pg';

/** Polls `ok` every 5 ms, for up to 5 s. */
async function until(ok: () => boolean | Promise<boolean>): Promise<void> {
  for (const end = Date.now() + 5000; !(await ok());) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 5));
  }
}

async function pgQuery(sql: string, params: unknown[] = []): Promise<Record<string, unknown>[]> {
  const c = new pg.Client({ connectionString: PG_URL });
  await c.connect();
  try {
    return (await c.query(sql, params)).rows;
  } finally {
    await c.end();
  }
}

const available = await pgAvailable();
const schema = freshSchema();
let a: TestAuthority;
let b: TestAuthority;

if (!available) {
  console.log(`SKIPPED two authorities on one PostgreSQL: ${PG_URL} is unreachable`);
} else {
  test.before(async () => {
    // Started together: the first start of both must generate one grant key and one root key.
    [a, b] = await Promise.all([
      startTestAuthority({ databaseUrl: PG_URL, schema }),
      startTestAuthority({ databaseUrl: PG_URL, schema }),
    ]);
  });
  test.after(async () => {
    await a?.close();
    await b?.close();
    await dropSchema(schema);
  });

  test('one set of keys: both publish the same JWKS and the same root', async () => {
    const ja = (await a.call('GET', '/.well-known/ctl-keys.json', undefined, null)).body;
    const jb = (await b.call('GET', '/.well-known/ctl-keys.json', undefined, null)).body;
    assert.is(ja.keys.length, 1);
    assert.equal(ja, jb);
    assert.is((await a.authority.keys.rootSigner()).publicKeyPem, (await b.authority.keys.rootSigner()).publicKeyPem);
  });

  test('a grant issued by A is served and revoked through B; A sees the revocation at once', async () => {
    const wallet = await generateKeyPair({ alg: 'EdDSA' });
    const grant = (await a.call('POST', '/grants', await grantRequest(a, wallet.publicJwk))).body;
    assert.equal((await b.call('GET', `/grants/${grant.grantId}`)).body.grant, grant);
    // The wallet and merchant use B's JWKS for a grant A signed (its revocation URL points at A).
    const sba = await createSession(grant, {
      actorId: 'v1',
      signingKey: wallet.privateKeyPem,
      revocationTtl: 0,
    }).createSba({ amount: '7', currency: 'USD', rail: 'x402' });
    const jwksUrl = `${b.url}/.well-known/ctl-keys.json`;
    assert.is((await verifyCtl(sba, { amount: '7', currency: 'USD', jwksUrl, revocationTtl: 0 })).valid, true);
    const rb = await b.call('POST', `/grants/${grant.grantId}/revoke`, { reason: 'via B' });
    assert.is(rb.status, 200);
    assert.equal((await a.call('GET', `/revoke?grantId=${grant.grantId}`, undefined, null)).body, {
      grantId: grant.grantId,
      revoked: true,
      revokedAt: rb.body.revokedAt,
    });
    const again = await a.call('POST', '/revoke', { grantId: grant.grantId });
    assert.is(again.body.revokedAt, rb.body.revokedAt);
    const r = await verifyCtl(sba, { amount: '7', currency: 'USD', jwksUrl, revocationTtl: 0 });
    assert.equal(r.valid ? 'valid' : r.error.code, 'grant_revoked');
  });

  /** A grant issued by `t` (an API call); its id. */
  const issue = async (t: TestAuthority) => {
    const wallet = await generateKeyPair({ alg: 'EdDSA' });
    return (await t.call('POST', '/grants', await grantRequest(t, wallet.publicJwk))).body.grantId as string;
  };
  const status = async (t: TestAuthority, id: string) =>
    (await t.call('GET', `/revoke?grantId=${id}`, undefined, null)).body.revoked;

  test(
    'revoked on A, answered as revoked by B at the very next check, again and again (B ' + 'answering from its cache)',
    async () => {
      await until(() => a.authority.store.revocationCache.live && b.authority.store.revocationCache.live);
      for (let i = 0; i < 30; i++) {
        const id = await issue(i % 2 ? a : b);
        await until(async () => (await b.call('GET', `/revoke?grantId=${id}`, undefined, null)).status === 200);
        assert.is(await status(b, id), false);
        assert.is(await status(b, id), false); // now a cache hit on B
        const [from, to] = i % 3 ? [a, b] : [b, a];
        if (from === b) assert.is(await status(a, id), false);
        assert.is((await from.call('POST', '/revoke', { grantId: id })).status, 200);
        assert.is(await status(to, id), true, `check ${i}`);
      }
      assert.ok(b.authority.store.revocationCache.size >= 20);
    },
  );

  test(
    'under a stream of checks on B, every check that starts after A answered the revocation ' + 'says revoked',
    async () => {
      const id = await issue(a);
      await until(async () => (await status(b, id)) === false);
      let revokedAnswered = false;
      let stop = false;
      const late: boolean[] = [];
      const loops = Array.from({ length: 8 }, async () => {
        while (!stop) {
          const after = revokedAnswered;
          const revoked = await status(b, id);
          if (after) late.push(revoked);
        }
      });
      await new Promise((r) => setTimeout(r, 50));
      assert.is((await a.call('POST', '/revoke', { grantId: id })).status, 200);
      revokedAnswered = true;
      await new Promise((r) => setTimeout(r, 100));
      stop = true;
      await Promise.all(loops);
      assert.ok(late.length > 8);
      assert.ok(
        late.every((x) => x === true),
        `${late.filter((x) => !x).length} of ${late.length} late checks said not revoked`,
      );
    },
  );

  test('listener lost: caches are dropped and not trusted until it is back, then revocations flow again', async () => {
    const id = await issue(a);
    await until(async () => (await status(b, id)) === false);
    const listener = `ctl-listen-${process.pid}`;
    const pids = async () =>
      (await pgQuery('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [listener])).map(
        (r) => r.pid as number,
      );
    const [old] = await pids();
    assert.ok(old, 'one listening connection for this process');
    assert.is((await pids()).length, 1, 'shared by both authorities of this process');
    await pgQuery('SELECT pg_terminate_backend($1)', [old]);
    await until(() => !b.authority.store.revocationCache.live);
    assert.is(b.authority.store.revocationCache.size, 0);
    // While it is down, checks read the database.
    assert.is((await a.call('POST', '/revoke', { grantId: id })).status, 200);
    assert.is(await status(b, id), true);
    await until(async () => b.authority.store.revocationCache.live && (await pids()).some((p) => p !== old));
    const next = await issue(b);
    await until(async () => (await status(b, next)) === false);
    assert.is(await status(b, next), false);
    assert.is((await a.call('POST', '/revoke', { grantId: next })).status, 200);
    assert.is(await status(b, next), true);
  });

  test('bundle sequences interleave across both and only grow; rotation on A is used by B', async () => {
    const expiresAt = new Date(Date.now() + 86_400_000).toISOString();
    const made = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        (i % 2 ? a : b).call('POST', '/trust-bundles', { scope: { region: 'eu' }, expiresAt }),
      ),
    );
    assert.equal(
      made.map((m) => m.status),
      Array(8).fill(201),
    );
    assert.equal(
      made.map((m) => m.body.sequence).sort((x, y) => x - y),
      [1, 2, 3, 4, 5, 6, 7, 8],
    );
    const newest = (await a.call('GET', '/trust-bundles?region=eu', undefined, null)).body.bundles;
    assert.is(newest.length, 1);
    assert.is(newest[0].sequence, 8);

    const rot = (await a.call('POST', '/admin/keys/rotate')).body;
    const wallet = await generateKeyPair({ alg: 'EdDSA' });
    const viaB = (await b.call('POST', '/grants', await grantRequest(b, wallet.publicJwk))).body;
    assert.is(viaB.keyId, rot.kid);
  });

  test('one audit chain across both processes', async () => {
    const v = (await b.call('GET', '/audit/verify')).body;
    assert.is(v.ok, true);
    const entries = (await a.call('GET', '/audit?limit=1000')).body.entries;
    assert.is(v.count, entries.length);
    assert.ok(entries.length >= 14);
  });
}

test.run();
