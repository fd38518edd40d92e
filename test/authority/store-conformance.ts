/**
 * One conformance suite for every AuthorityStore implementation. `open` gives a
 * fresh, migrated store and its raw database (to tamper with the audit log); `openTwin`, when
 * given, opens a second store on the same database, standing in for a second process.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { SqlDatabase } from '../../service-kit/index.js';
import type { AuthorityStore, SigningKeyRow } from '../../authority/store/types.js';

export interface Harness {
  store: AuthorityStore;
  db: SqlDatabase;
  openTwin?: () => Promise<AuthorityStore>;
  cleanup(): Promise<void>;
}

const H = 'a'.repeat(64);
const H2 = 'b'.repeat(64);
const iso = (ms: number) => new Date(ms).toISOString();
const NOW = Date.parse('2026-06-01T00:00:00Z');

function grantRecord(grantId: string, over: Partial<{ keyId: string; expiresAtMs: number; policyHash: string }> = {}) {
  return {
    grantId,
    policyHash: over.policyHash ?? H,
    keyId: over.keyId ?? 'k1',
    grant: JSON.stringify({ grantId }),
    issuedAt: iso(NOW),
    expiresAtMs: over.expiresAtMs ?? NOW + 3600_000,
    createdBy: 'tester',
  };
}

function keyRow(kid: string, purpose: 'grant' | 'bundle' = 'grant', createdAt = iso(NOW)): SigningKeyRow {
  return {
    kid,
    purpose,
    alg: 'EdDSA',
    status: 'retired',
    publicJwk: `{"kty":"OKP","crv":"Ed25519","x":"${kid}"}`,
    publicPem: `PEM ${kid}`,
    privatePem: `PRIVATE ${kid}`,
    source: 'generated',
    createdAt,
    retiredAt: null,
  };
}

/** Polls `ok` every 5 ms, for up to 5 s. */
async function until(ok: () => boolean | Promise<boolean>): Promise<void> {
  for (const end = Date.now() + 5000; !(await ok());) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 5));
  }
}

export function storeConformance(name: string, open: () => Promise<Harness>): void {
  const t = suite<{ h: Harness }>(`store conformance: ${name}`, {} as { h: Harness });
  t.before.each(async (ctx) => {
    ctx.h = await open();
  });
  t.after.each(async (ctx) => {
    await ctx.h.cleanup();
  });

  t('ping answers true on a live database', async ({ h }) => {
    assert.is(await h.store.ping(), true);
  });

  t('a policy stored twice is one policy with the first storedAt', async ({ h }) => {
    const a = await h.store.putPolicy(H, '{"x":1}', iso(NOW));
    const b = await h.store.putPolicy(H, '{"x":1}', iso(NOW + 1000));
    assert.equal(a, { policyHash: H, storedAt: iso(NOW), created: true });
    assert.equal(b, { policyHash: H, storedAt: iso(NOW), created: false });
    assert.equal(await h.store.getPolicy(H), { policyHash: H, document: '{"x":1}', storedAt: iso(NOW) });
    assert.is(await h.store.getPolicy(H2), undefined);
  });

  t('a grant needs a stored policy', async ({ h }) => {
    let failed = false;
    try {
      await h.store.putGrant(grantRecord('g1', { policyHash: H2 }));
    } catch {
      failed = true;
    }
    assert.ok(failed, 'foreign key on policy_hash');
  });

  t('revocation: immediate, idempotent, first revokedAt stays; unknown grant is undefined', async ({ h }) => {
    await h.store.putPolicy(H, '{}', iso(NOW));
    await h.store.putGrant(grantRecord('g1'));
    assert.equal(await h.store.revocationStatus('g1'), { revoked: false });
    const first = await h.store.revokeGrant('g1', { at: iso(NOW + 10), actor: 'a', reason: 'lost' });
    assert.equal(first, { revokedAt: iso(NOW + 10), changed: true });
    const again = await h.store.revokeGrant('g1', { at: iso(NOW + 20), actor: 'b' });
    assert.equal(again, { revokedAt: iso(NOW + 10), changed: false });
    assert.equal(await h.store.revocationStatus('g1'), { revoked: true, revokedAt: iso(NOW + 10) });
    const g = await h.store.getGrant('g1');
    assert.is(g?.revokedBy, 'a');
    assert.is(g?.revokeReason, 'lost');
    assert.is(await h.store.revokeGrant('nope', { at: iso(NOW), actor: 'a' }), undefined);
    assert.is(await h.store.revocationStatus('nope'), undefined);
  });

  t('concurrent revocations of one grant: exactly one changes it', async ({ h }) => {
    await h.store.putPolicy(H, '{}', iso(NOW));
    await h.store.putGrant(grantRecord('g1'));
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => h.store.revokeGrant('g1', { at: iso(NOW + i), actor: `a${i}` })),
    );
    assert.is(results.filter((r) => r?.changed).length, 1);
    assert.is(new Set(results.map((r) => r?.revokedAt)).size, 1);
  });

  t('revocation status is cached, and a revocation through another process is answered at once', async ({ h }) => {
    const twin = h.openTwin ? await h.openTwin() : h.store;
    try {
      await cachedAndFollowed(h, twin);
    } finally {
      if (twin !== h.store) await twin.close();
    }
  });

  async function cachedAndFollowed(h: Harness, twin: AuthorityStore) {
    await until(() => h.store.revocationCache.live && twin.revocationCache.live);
    await h.store.putPolicy(H, '{}', iso(NOW));
    for (let i = 0; i < 20; i++) {
      const id = `r${i}`;
      await twin.putGrant(grantRecord(id));
      await until(async () => (await h.store.revocationStatus(id)) !== undefined);
      assert.equal(await h.store.revocationStatus(id), { revoked: false });
      const before = h.store.revocationCache.size;
      assert.equal(await h.store.revocationStatus(id), { revoked: false }, 'a cache hit');
      assert.is(h.store.revocationCache.size, before);
      const r = await twin.revokeGrant(id, { at: iso(NOW + i), actor: 'a' });
      assert.equal(await h.store.revocationStatus(id), { revoked: true, revokedAt: r!.revokedAt });
    }
    assert.ok(h.store.revocationCache.size >= 20);
    // "Unknown grant" is cached too, until the grant is inserted (by whichever process).
    assert.is(await h.store.revocationStatus('later'), undefined);
    await twin.putGrant(grantRecord('later'));
    await until(async () => (await h.store.revocationStatus('later')) !== undefined);
    assert.equal(await h.store.revocationStatus('later'), { revoked: false });
  }

  t(
    'revoked ids for bundles keep a revoked grant a day past its expiry (clock tolerance), then leave it out',
    async ({ h }) => {
      const DAY = 86_400_000;
      await h.store.putPolicy(H, '{}', iso(NOW));
      await h.store.putGrant(grantRecord('live', { expiresAtMs: NOW + 1000 }));
      await h.store.putGrant(grantRecord('recent', { expiresAtMs: NOW - 1000 }));
      await h.store.putGrant(grantRecord('dead', { expiresAtMs: NOW - DAY - 1000 }));
      await h.store.putGrant(grantRecord('fine', { expiresAtMs: NOW + 1000 }));
      for (const id of ['live', 'recent', 'dead']) await h.store.revokeGrant(id, { at: iso(NOW), actor: 'a' });
      assert.equal(await h.store.listRevokedGrantIds(NOW), ['live', 'recent']);
      assert.equal(
        await h.store.listRevokedGrantIds(NOW + 5000),
        ['live', 'recent'],
        'expired seconds ago: still listed',
      );
      assert.equal(await h.store.listRevokedGrantIds(NOW + DAY + 5000), [], 'a day past every expiry: gone');
    },
  );

  t('soft delete: hidden from reads and listings, kept in custody, revocation still answers', async ({ h }) => {
    await h.store.putPolicy(H, '{}', iso(NOW));
    await h.store.putGrant(grantRecord('g1'));
    await h.store.putGrant(grantRecord('g2'));
    assert.is(await h.store.softDeleteGrant('g1', iso(NOW)), true);
    assert.is(await h.store.softDeleteGrant('g1', iso(NOW + 1)), false);
    assert.is(await h.store.softDeleteGrant('nope', iso(NOW)), false);
    assert.is(await h.store.getGrant('g1'), undefined);
    assert.is((await h.store.getGrant('g1', { includeDeleted: true }))?.deletedAt, iso(NOW));
    assert.equal(
      (await h.store.listGrants()).map((g) => g.grantId),
      ['g2'],
    );
    assert.equal(
      (await h.store.listGrants({ includeDeleted: true })).map((g) => g.grantId),
      ['g1', 'g2'],
    );
    assert.equal(await h.store.revocationStatus('g1'), { revoked: false });
  });

  t('grant listing pages by id', async ({ h }) => {
    await h.store.putPolicy(H, '{}', iso(NOW));
    for (const id of ['c', 'a', 'b', 'd']) await h.store.putGrant(grantRecord(id));
    assert.equal(
      (await h.store.listGrants({ limit: 2 })).map((g) => g.grantId),
      ['a', 'b'],
    );
    assert.equal(
      (await h.store.listGrants({ afterGrantId: 'b', limit: 2 })).map((g) => g.grantId),
      ['c', 'd'],
    );
  });

  t('API keys: stored, listed, revoked idempotently', async ({ h }) => {
    const row = {
      keyId: 'k1',
      hash: 'f'.repeat(64),
      scopes: ['grants:write'],
      label: 'fleet',
      createdAt: iso(NOW),
      createdBy: 'bootstrap',
      revokedAt: null,
    };
    await h.store.putApiKey(row);
    assert.equal(await h.store.getApiKey('k1'), row);
    assert.equal(await h.store.listApiKeys(), [row]);
    assert.equal(await h.store.revokeApiKey('k1', iso(NOW + 5)), { revokedAt: iso(NOW + 5), changed: true });
    assert.equal(await h.store.revokeApiKey('k1', iso(NOW + 9)), { revokedAt: iso(NOW + 5), changed: false });
    assert.is(await h.store.revokeApiKey('nope', iso(NOW)), undefined);
    assert.is(await h.store.getApiKey('nope'), undefined);
  });

  t('signing keys: concurrent first starts create one key; activation retires the others', async ({ h }) => {
    let made = 0;
    const create = async () => keyRow(`gen${++made}`);
    const stores = [h.store];
    if (h.openTwin) stores.push(await h.openTwin());
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) => stores[i % stores.length].ensureActiveSigningKey('grant', create)),
    );
    assert.is(results.filter((r) => r.created).length, 1);
    assert.is(new Set(results.map((r) => r.row.kid)).size, 1);
    const first = results[0].row.kid;
    assert.is((await h.store.activeSigningKey('grant'))?.kid, first);
    assert.is(await h.store.activeSigningKey('bundle'), undefined);

    assert.is(await h.store.putSigningKey(keyRow('next', 'grant', iso(NOW + 1))), true);
    assert.is(await h.store.putSigningKey(keyRow('next', 'grant', iso(NOW + 1))), false);
    await h.store.activateSigningKey('next', 'grant', iso(NOW + 2));
    const all = await h.store.listSigningKeys();
    assert.equal(
      all.filter((k) => k.status === 'active').map((k) => k.kid),
      ['next'],
    );
    assert.is(all.find((k) => k.kid === first)?.retiredAt, iso(NOW + 2));
    assert.is((await h.store.getSigningKey('next'))?.privatePem, 'PRIVATE next');
    if (stores.length > 1) await stores[1].close();
  });

  t(
    "signing keys: a stored key's activation leaves keys held from an environment alone; " +
      'a hold touches no other key and its lease only grows',
    async ({ h }) => {
      const env = (kid: string): SigningKeyRow => ({
        ...keyRow(kid),
        privatePem: null,
        source: 'env',
        status: 'active',
      });
      await h.store.ensureActiveSigningKey('grant', async () => keyRow('stored-1'), 'generated');
      assert.is(await h.store.putSigningKey(env('env-1')), true);
      assert.is(await h.store.holdSigningKey('env-1', NOW + 10), true);
      assert.is(await h.store.holdSigningKey('env-1', NOW + 5), true);
      assert.is(await h.store.putSigningKey(env('env-2')), true);
      assert.is(await h.store.holdSigningKey('env-2', NOW + 7), true);
      assert.is(await h.store.holdSigningKey('stored-1', NOW + 7), false, 'only keys from an environment are held');
      assert.is(await h.store.holdSigningKey('nope', NOW), false);

      await h.store.putSigningKey(keyRow('stored-2', 'grant', iso(NOW + 1)));
      await h.store.activateSigningKey('stored-2', 'grant', iso(NOW + 2));
      const byKid = Object.fromEntries(
        (await h.store.listSigningKeys()).map((k) => [k.kid, `${k.status}:${k.lastSeenMs}`]),
      );
      assert.equal(byKid, {
        'stored-1': 'retired:null',
        'stored-2': 'active:null',
        'env-1': `active:${NOW + 10}`,
        'env-2': `active:${NOW + 7}`,
      });
      assert.is((await h.store.activeSigningKey('grant', 'generated'))?.kid, 'stored-2');
      assert.is((await h.store.activeSigningKey('grant', 'env'))?.source, 'env');
      // An existing stored key answers ensure for 'generated' even though keys from environments are active.
      const again = await h.store.ensureActiveSigningKey('grant', async () => keyRow('never'), 'generated');
      assert.equal([again.row.kid, again.created], ['stored-2', false]);
    },
  );

  t('signing keys: the latest expiry of what a key signed is reported', async ({ h }) => {
    await h.store.putSigningKey(keyRow('k1'));
    await h.store.putSigningKey(keyRow('k2'));
    await h.store.putPolicy(H, '{}', iso(NOW));
    await h.store.putGrant(grantRecord('g1', { keyId: 'k1', expiresAtMs: NOW + 100 }));
    await h.store.putGrant(grantRecord('g2', { keyId: 'k1', expiresAtMs: NOW + 900 }));
    const byKid = Object.fromEntries((await h.store.listSigningKeys()).map((k) => [k.kid, k.lastGrantExpiryMs]));
    assert.equal(byKid, { k1: NOW + 900, k2: null });
  });

  t('bundle sequence: grows per scope, atomically under concurrency (and across processes)', async ({ h }) => {
    const stores = [h.store];
    if (h.openTwin) stores.push(await h.openTwin());
    const seqs = await Promise.all(
      Array.from({ length: 30 }, (_, i) => stores[i % stores.length].nextBundleSequence('scope-a')),
    );
    assert.equal(
      [...seqs].sort((a, b) => a - b),
      Array.from({ length: 30 }, (_, i) => i + 1),
    );
    assert.is(await h.store.nextBundleSequence('scope-b'), 1);
    assert.is(await h.store.nextBundleSequence('scope-a'), 31);
    if (stores.length > 1) await stores[1].close();
  });

  t('latest bundles: newest per scope, unset fields match any filter, expired left out', async ({ h }) => {
    const put = async (
      bundleId: string,
      scopeKey: string,
      scope: object,
      sequence: number,
      expiresAtMs = NOW + 10_000,
    ) =>
      h.store.putBundle({
        bundleId,
        scopeKey,
        scope,
        sequence,
        issuedAt: iso(NOW),
        expiresAtMs,
        bundle: JSON.stringify({ bundleId }),
      });
    await put('fuel1', 'fuel', { category: 'fuel' }, 1);
    await put('fuel2', 'fuel', { category: 'fuel' }, 2);
    await put('eu', 'eu', { region: 'eu' }, 1);
    await put('any', '{}', {}, 1);
    await put('old', 'parking', { category: 'parking' }, 1, NOW - 1);
    const ids = async (f: object) => (await h.store.latestBundles(f, NOW)).map((b) => b.bundleId).sort();
    assert.equal(await ids({}), ['any', 'eu', 'fuel2']);
    assert.equal(await ids({ category: 'fuel' }), ['any', 'eu', 'fuel2']);
    assert.equal(await ids({ category: 'parking' }), ['any', 'eu']);
    assert.equal(await ids({ category: 'fuel', region: 'us' }), ['any', 'fuel2']);
    const [fuel] = await h.store
      .latestBundles({ category: 'fuel', region: 'us' }, NOW)
      .then((r) => r.filter((b) => b.scopeKey === 'fuel'));
    assert.equal(fuel.scope, { category: 'fuel' });
    assert.is(fuel.sequence, 2);
    let dup = false;
    try {
      await put('fuel2b', 'fuel', { category: 'fuel' }, 2);
    } catch {
      dup = true;
    }
    assert.ok(dup, 'one bundle per (scope, sequence)');
  });

  t('audit log: concurrent appends form one chain; an edit or a gap is detected', async ({ h }) => {
    const stores = [h.store];
    if (h.openTwin) stores.push(await h.openTwin());
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        stores[i % stores.length].audit.append({ actor: 'a', action: 'x', subject: `s${i}`, data: { i } }),
      ),
    );
    const v = await h.store.audit.verify();
    assert.is(v.ok, true);
    assert.is(v.ok && v.count, 20);
    const entries = await h.store.audit.list({ afterSeq: 5, limit: 3 });
    assert.equal(
      entries.map((e) => e.seq),
      [6, 7, 8],
    );
    assert.is(entries[1].prevHash, entries[0].hash);

    await h.db.run(`UPDATE audit_log SET data = ? WHERE seq = 7`, ['{"i":999}']);
    const edited = await h.store.audit.verify();
    assert.equal(edited.ok ? 0 : edited.badSeq, 7);
    await h.db.run(`UPDATE audit_log SET data = ? WHERE seq = 7`, [entries[1].data]);
    assert.is((await h.store.audit.verify()).ok, true);
    await h.db.run(`DELETE FROM audit_log WHERE seq = 12`);
    const gap = await h.store.audit.verify();
    assert.equal(gap.ok ? 0 : gap.badSeq, 13);
    if (stores.length > 1) await stores[1].close();
  });

  t(
    'webhook outbox: written in a transaction (gone with its rollback), read back as the dispatch log by status',
    async ({ h }) => {
      const outbox = h.store.webhookOutbox({ resolve: () => undefined, now: () => NOW });
      const id = await h.db.tx((q) =>
        outbox.enqueue(q, { type: 'audit.appended', data: { seq: 1 }, at: NOW }, [
          { url: 'http://x/hook', target: 'http://x/hook' },
        ]),
      );
      await h.db
        .tx(async (q) => {
          await outbox.enqueue(q, { type: 'audit.appended', data: { seq: 2 } }, [
            { url: 'http://x/hook', target: 'http://x/hook' },
          ]);
          throw new Error('rolled back');
        })
        .catch(() => {});
      const pending = await h.store.dispatchLog.list({ status: 'pending' });
      assert.equal(
        pending.map((d) => [d.messageId, d.endpoint, d.eventType, d.attempts, d.nextAttemptAt]),
        [[id, 'http://x/hook', 'audit.appended', 0, iso(NOW)]],
      );
      assert.equal(JSON.parse(pending[0].body), { type: 'audit.appended', timestamp: iso(NOW), data: { seq: 1 } });
      // No secret for the target: dead-lettered at once, kept in the log with the reason.
      assert.is(await outbox.runOnce(), 1);
      const [dead] = await h.store.dispatchLog.list({ status: 'failed' });
      assert.equal(
        [dead.messageId, dead.attempts, dead.lastError, dead.nextAttemptAt],
        [id, 1, 'the endpoint is no longer configured', null],
      );
      assert.equal(await h.store.dispatchLog.list({ status: 'pending' }), []);
      await outbox.close();
    },
  );

  t.run();
}
