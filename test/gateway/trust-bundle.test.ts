/**
 * The gateway's Trust Bundle (PROTOCOL.md §12): every revoked grant not long expired is listed
 * (no cap), the sequence comes from the database so instances never publish out of order (even
 * with clocks apart), and a revocation is in the bundle any instance serves within 5 s.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import { verifyTrustBundle, publicKeyPemFromJwk } from '../../src/index.js';
import {
  sqliteDb,
  postgresDb,
  startTestGateway,
  createSession,
  call,
  ADMIN_KEY,
  type TestGateway,
  type TestDb,
} from './helpers.js';

type Bundle = { sequence: number; revokedGrants: string[]; issuers: { keys: { kid: string }[] }[]; issuedAt: string };
const bundleOf = async (gw: { url: string }) => {
  const res = await call(gw.url, 'GET', '/.well-known/ctl-trust-bundle.json');
  assert.is(res.status, 200, res.text);
  return res.body as Bundle;
};
const revoke = (gw: TestGateway, sessionId: string) =>
  call(gw.url, 'DELETE', `/sessions/${sessionId}`, { key: gw.ownerKey });

async function verified(gw: TestGateway, bundle: Bundle, now = Date.now) {
  const root = (await call(gw.url, 'GET', '/.well-known/ctl-bundle-root.json')).body.keys[0];
  const v = await verifyTrustBundle(bundle as any, await publicKeyPemFromJwk(root), { now });
  assert.ok(v.valid, JSON.stringify(v));
}

/** Polls the bundle `from` serves until it lists `grantId`: the ms that took, Infinity after `limitMs`. */
async function msUntilListed(from: { url: string }, grantId: string, limitMs = 5000): Promise<number> {
  const t0 = Date.now();
  while (Date.now() - t0 <= limitMs) {
    if ((await bundleOf(from)).revokedGrants.includes(grantId)) return Date.now() - t0;
    await new Promise((r) => setTimeout(r, 100));
  }
  return Infinity;
}

test('every revoked grant that has not expired is listed: 1,200 of them, none capped', async () => {
  const db = sqliteDb();
  const gw = await startTestGateway(db);
  try {
    const now = Date.now();
    const rows = async (n: number, expiresAt: number) => {
      const ids: string[] = [];
      await gw.db.tx(async (q) => {
        for (let i = 0; i < n; i++) {
          const grantId = `grant_${randomBytes(12).toString('base64url')}`;
          ids.push(grantId);
          await q.run(
            `INSERT INTO gw_sessions (id, owner_id, token_hash, label, currency, ceiling, state, expires_at,
              created_at, ended_at, config, policy_hash, grant_id, grant_json, actor_key_pem)
             VALUES (?, 'o', ?, 'x', 'USD', 10, 'revoked', ?, ?, ?, '{}', 'h', ?, '{}', 'pem')`,
            [
              `sess_${randomBytes(12).toString('base64url')}`,
              randomBytes(16).toString('hex'),
              expiresAt,
              now - 7200_000,
              now - 60_000 - i,
              grantId,
            ],
          );
        }
      });
      return ids;
    };
    const live = await rows(1200, now + 3600_000);
    // Expired an hour ago: still listed (a verifier may run with clock tolerance); two days ago: not.
    const justExpired = await rows(3, now - 3600_000);
    const longGone = await rows(3, now - 2 * 86_400_000);
    const bundle = await bundleOf(gw);
    await verified(gw, bundle);
    assert.is(bundle.revokedGrants.length, 1203);
    assert.equal(new Set(bundle.revokedGrants), new Set([...live, ...justExpired]));
    for (const g of longGone) assert.not.ok(bundle.revokedGrants.includes(g));
  } finally {
    await gw.close();
    await db.drop();
  }
});

test(
  'a revocation is in the served bundle within 5 s, on this instance and another on ' + 'the same SQLite file',
  async () => {
    const db = sqliteDb();
    const a = await startTestGateway(db);
    const b = await startTestGateway(db, {}, a.ownerKey);
    try {
      const before = [await bundleOf(a), await bundleOf(b)]; // both have served (and cached) a bundle
      const s = await createSession(a);
      assert.is((await revoke(a, s.sessionId)).status, 200);
      for (const gw of [a, b])
        assert.ok((await msUntilListed(gw, s.grantId)) <= 5000, `listed by ${gw.url} within 5 s`);
      for (const gw of [a, b]) assert.ok((await bundleOf(gw)).sequence > before[0]!.sequence, 'a higher sequence');
    } finally {
      await b.close();
      await a.close();
      await db.drop();
    }
  },
);

test('a bundle past its refresh time is re-issued under a higher sequence, keeping every revocation', async () => {
  const db = sqliteDb();
  let skew = 0;
  const gw = await startTestGateway(db, { now: () => Date.now() + skew });
  try {
    const s = await createSession(gw);
    await revoke(gw, s.sessionId);
    const first = await bundleOf(gw);
    assert.equal(await bundleOf(gw), first, 'the same sequence is the same bundle');
    skew = 61_000;
    const next = await bundleOf(gw);
    assert.ok(next.sequence > first.sequence);
    assert.ok(Date.parse(next.issuedAt) > Date.parse(first.issuedAt));
    assert.equal(next.revokedGrants, [s.grantId]);
    await verified(gw, next, () => Date.now() + skew);
  } finally {
    await gw.close();
    await db.drop();
  }
});

test(
  'two instances on one PostgreSQL database, clocks 30 s apart: sequences only grow, ' + 'one bundle per sequence',
  async () => {
    const pg = await postgresDb('Trust Bundle sequence across instances');
    if (!pg) return;
    const ahead = await startTestGateway(pg, { now: () => Date.now() + 30_000 });
    const behind = await startTestGateway(pg, {}, ahead.ownerKey);
    try {
      const sessions = await Promise.all(Array.from({ length: 8 }, () => createSession(ahead)));
      const seen: Bundle[] = [await bundleOf(ahead)];
      for (let i = 0; i < sessions.length; i++) {
        const s = sessions[i]!;
        const by = i % 2 ? ahead : behind;
        assert.is((await revoke(by, s.sessionId)).status, 200);
        // In turn from each instance: none goes back, each lists all revoked so far.
        for (const gw of i % 2 ? [behind, ahead] : [ahead, behind]) {
          const bundle = await bundleOf(gw);
          const last = seen[seen.length - 1]!;
          assert.ok(bundle.sequence >= last.sequence, `sequence ${bundle.sequence} after ${last.sequence}`);
          if (bundle.sequence === last.sequence) assert.equal(bundle, last, 'one sequence, one bundle');
          for (const done of sessions.slice(0, i + 1))
            assert.ok(bundle.revokedGrants.includes(done.grantId), `revocation ${i} listed`);
          seen.push(bundle);
        }
      }
      // A key rotation on one instance raises the sequence the other serves, with the new key.
      const rotated = await call(ahead.url, 'POST', '/admin/keys/rotate', {
        key: ADMIN_KEY,
        body: { purpose: 'receipt' },
      });
      assert.is(rotated.status, 200, rotated.text);
      const after = await bundleOf(behind);
      assert.ok(after.sequence > seen[seen.length - 1]!.sequence);
      assert.ok(after.issuers[0]!.keys.some((k) => k.kid === rotated.body.kid));
      await verified(behind, after);
    } finally {
      await behind.close();
      await ahead.close();
      await pg.drop();
    }
  },
);

test.run();
