/**
 * A Trust Bundle lists at most 256 issuers: the authority and 255 enrolled people. The enrolment
 * that would make some bundle list more is refused (409 `conflict`, naming the limit), atomically
 * across concurrent requests and instances; bundle issuance never fails on a well-formed request,
 * even on a database that holds more people than a bundle can list. On SQLite and PostgreSQL.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { join } from 'node:path';
import { didKeyFromJwk, generateKeyPair } from '../../src/index.js';
import { openDatabase, type SqlDatabase } from '../../service-kit/index.js';
import { fullestBundleWith, MAX_PEOPLE_PER_BUNDLE, type EnrolledHuman } from '../../authority/store/humans.js';
import { grantRequest, startTestAuthority, type TestAuthority } from './harness.js';
import { MAX_ISSUER_KEYS } from '../../authority/routes/trust-bundles.js';
import { PG_URL, dropSchema, freshSchema, pgAvailable } from '../service-kit/pg-fixture.js';

const person = (scope: EnrolledHuman['scope'], n = 0): EnrolledHuman => ({
  did: `did:key:z${n}`,
  label: '',
  scope,
  publicJwk: '{}',
  enrolledAt: '',
  enrolledBy: '',
  removedAt: null,
});

test('the fullest bundle a person would join: scope fields they set fixed, the others at their fullest values', () => {
  const people = [
    person({}),
    person({ category: 'a' }),
    person({ category: 'b' }),
    person({ category: 'b' }),
    person({ merchant: 'm' }),
    person({ category: 'a', merchant: 'm' }),
    person({ region: 'eu' }),
    person({ category: 'c', region: 'us' }),
  ];
  // Unscoped: the bundle {category a, merchant m, region eu} lists 1 + 1 + 1 + 1 + 1 = 5 of them, plus the newcomer.
  assert.is(fullestBundleWith(people, {}), 6);
  // category b: {} + 2 b + merchant m + region eu, plus the newcomer.
  assert.is(fullestBundleWith(people, { category: 'b' }), 6);
  // merchant n: no one scoped to merchant m; {category b, region eu} lists {} + 2 b + eu, plus the newcomer.
  assert.is(fullestBundleWith(people, { merchant: 'n' }), 5);
  assert.is(fullestBundleWith(people, { category: 'c', merchant: 'x', region: 'us' }), 3);
  assert.is(fullestBundleWith([], { region: 'eu' }), 1);
  // Pairs only someone set together are counted together.
  const pairs = [
    person({ merchant: 'm', region: 'r' }),
    person({ merchant: 'm', region: 'r' }),
    person({ merchant: 'n' }),
    person({ region: 's' }),
  ];
  assert.is(fullestBundleWith(pairs, {}), 3);
});

/** Inserts enrolled people straight into the table, `at` their enrolment time (fast set-up; no limit checked). */
async function insertPeople(
  db: SqlDatabase,
  n: number,
  scope: (i: number) => EnrolledHuman['scope'] = () => ({}),
  at = (i: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString(),
) {
  for (let i = 0; i < n; i++) {
    const k = await generateKeyPair({ alg: 'EdDSA' });
    const s = scope(i);
    await db.run(
      'INSERT INTO humans (did, label, category, merchant, region, public_jwk, enrolled_at, ' +
        'enrolled_by, removed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL)',
      [
        didKeyFromJwk(k.publicJwk),
        `p${i}`,
        s.category ?? null,
        s.merchant ?? null,
        s.region ?? null,
        JSON.stringify(k.publicJwk),
        at(i),
        'test',
      ],
    );
  }
}

const newDid = async () => didKeyFromJwk((await generateKeyPair({ alg: 'EdDSA' })).publicJwk);
const inADay = () => new Date(Date.now() + 86_400_000).toISOString();
const issue = (t: TestAuthority, scope: Record<string, string>) =>
  t.call('POST', '/trust-bundles', { scope, expiresAt: inADay() });

function suite(kind: 'sqlite' | 'postgres') {
  /** One authority (two on PostgreSQL, on one schema) and a second handle on its database. */
  async function withAuthorities(run: (a: TestAuthority, b: TestAuthority, db: SqlDatabase) => Promise<void>) {
    if (kind === 'sqlite') {
      const a = await startTestAuthority();
      const db = await openDatabase(`sqlite:${join(a.dir, 'authority.db')}`);
      try {
        await run(a, a, db);
      } finally {
        await db.close();
        await a.close();
      }
      return;
    }
    if (!(await pgAvailable())) {
      console.log(`SKIPPED bundle people limit on PostgreSQL: ${PG_URL} is unreachable`);
      return;
    }
    const schema = freshSchema();
    const a = await startTestAuthority({ databaseUrl: PG_URL, schema });
    const b = await startTestAuthority({ databaseUrl: PG_URL, schema });
    const db = await openDatabase(PG_URL, { schema });
    try {
      await run(a, b, db);
    } finally {
      await db.close();
      await a.close();
      await b.close();
      await dropSchema(schema);
    }
  }

  test(
    `${kind}: the enrolment that would overflow a bundle is 409 naming the limit; every ` + 'bundle is still issued',
    () =>
      withAuthorities(async (a, _b, db) => {
        await insertPeople(db, MAX_PEOPLE_PER_BUNDLE - 1);
        assert.is((await a.call('POST', '/humans', { did: await newDid() })).status, 201, 'the 255th person fits');
        for (const scope of [undefined, { category: 'travel' }, { merchant: 'm1', region: 'eu' }]) {
          const refused = await a.call('POST', '/humans', { did: await newDid(), ...(scope ? { scope } : {}) });
          assert.is(refused.status, 409, JSON.stringify(refused.body));
          assert.is(refused.body.error.code, 'conflict');
          assert.match(refused.body.error.message, `at most ${MAX_PEOPLE_PER_BUNDLE} people`);
        }
        for (const scope of [{}, { category: 'travel' }, { merchant: 'm1', region: 'eu' }] as Record<
          string,
          string
        >[]) {
          const bundle = await issue(a, scope);
          assert.is(bundle.status, 201, JSON.stringify(bundle.body));
          assert.is(bundle.body.issuers.length, MAX_PEOPLE_PER_BUNDLE + 1);
        }
        assert.is((await a.call('GET', '/humans')).body.humans.length, MAX_PEOPLE_PER_BUNDLE);
      }),
  );

  test(`${kind}: people scoped apart are not counted together`, () =>
    withAuthorities(async (a, _b, db) => {
      await insertPeople(db, 300, (i) => ({ merchant: `m${i}` }));
      assert.is((await a.call('POST', '/humans', { did: await newDid(), scope: { merchant: 'm7' } })).status, 201);
      // An unscoped person joins every bundle; the fullest (merchant m7) then lists 3.
      assert.is((await a.call('POST', '/humans', { did: await newDid() })).status, 201);
      const bundle = await issue(a, { merchant: 'm7' });
      assert.is(bundle.status, 201);
      assert.is(bundle.body.issuers.length, 1 + 3);
    }));

  test(`${kind}: concurrent enrolments for the last places: exactly as many pass as there are places`, () =>
    withAuthorities(async (a, b, db) => {
      await insertPeople(db, MAX_PEOPLE_PER_BUNDLE - 2);
      const dids = await Promise.all(Array.from({ length: 8 }, newDid));
      const answers = await Promise.all(dids.map((did, i) => (i % 2 ? b : a).call('POST', '/humans', { did })));
      assert.equal(
        answers.map((r) => r.status).sort(),
        [201, 201, 409, 409, 409, 409, 409, 409],
        JSON.stringify(answers.map((r) => r.body)),
      );
      assert.is((await a.call('GET', '/humans')).body.humans.length, MAX_PEOPLE_PER_BUNDLE);
      assert.is((await issue(b, {})).status, 201);
      // Straight at the stores (no HTTP between them, so the attempts overlap): one place, one enrolled.
      await db.run('UPDATE humans SET removed_at = ? WHERE did = ?', [
        '2026-01-02T00:00:00.000Z',
        dids[answers.findIndex((r) => r.status === 201)]!,
      ]);
      const direct = await Promise.all(
        (await Promise.all(Array.from({ length: 16 }, newDid))).map(async (did, i) =>
          (i % 2 ? b : a).authority.store.enrolHuman({
            did,
            label: '',
            scope: {},
            publicJwk: '{}',
            enrolledAt: new Date().toISOString(),
            enrolledBy: 'test',
          }),
        ),
      );
      assert.is(direct.filter((e) => e.created).length, 1, JSON.stringify(direct));
      assert.is((await a.call('GET', '/humans')).body.humans.length, MAX_PEOPLE_PER_BUNDLE);
    }));

  test(
    `${kind}: a database that already holds more people than a bundle lists still issues, ` +
      'with the earliest enrolled',
    () =>
      withAuthorities(async (a, _b, db) => {
        await insertPeople(db, MAX_PEOPLE_PER_BUNDLE + 20);
        const earliest = (
          await db.all<{ did: string }>('SELECT did FROM humans ORDER BY enrolled_at LIMIT ?', [MAX_PEOPLE_PER_BUNDLE])
        )
          .map((r) => r.did)
          .sort();
        const bundle = await issue(a, { region: 'eu' });
        assert.is(bundle.status, 201, JSON.stringify(bundle.body));
        assert.is(bundle.body.issuers.length, MAX_PEOPLE_PER_BUNDLE + 1);
        assert.equal(
          bundle.body.issuers
            .slice(1)
            .map((i: { issuer: string }) => i.issuer)
            .sort(),
          earliest,
        );
        assert.is((await a.call('POST', '/humans', { did: await newDid() })).status, 409);
      }),
  );
}

test(
  'more live grant keys than a bundle issuer holds (many rotations): the bundle is issued ' +
    'with the held key and those whose grants run longest',
  async () => {
    const a = await startTestAuthority();
    try {
      const wallet = await generateKeyPair({ alg: 'EdDSA' });
      const extra = 3;
      // A grant under each key, each expiring later than the one before: every key stays published.
      const signedBy: string[] = [];
      for (let i = 0; i < MAX_ISSUER_KEYS + extra; i++) {
        const expiresAt = new Date(Date.now() + 3600_000 + i * 60_000).toISOString();
        const grant = await a.call('POST', '/grants', await grantRequest(a, wallet.publicJwk, { expiresAt }));
        assert.is(grant.status, 201);
        signedBy.push(grant.body.keyId);
        assert.is((await a.call('POST', '/admin/keys/rotate')).status, 201);
      }
      assert.is(new Set(signedBy).size, MAX_ISSUER_KEYS + extra);
      const published = (await a.call('GET', '/.well-known/ctl-keys.json')).body.keys as {
        kid: string;
        status: string;
      }[];
      assert.is(published.length, MAX_ISSUER_KEYS + extra + 1);
      const bundle = await issue(a, {});
      assert.is(bundle.status, 201, JSON.stringify(bundle.body));
      const kids = bundle.body.issuers[0].keys as { kid: string; status: string }[];
      assert.is(kids.length, MAX_ISSUER_KEYS);
      assert.ok(
        kids.some((k) => k.status === 'active'),
        'the key that signs now is carried',
      );
      // Kept: the active key (it signed nothing yet) and the 63 whose grants expire last; left out the first ones.
      assert.equal(
        kids.map((k) => k.kid).sort(),
        [...published.filter((k) => k.status === 'active').map((k) => k.kid), ...signedBy.slice(extra + 1)].sort(),
      );
    } finally {
      await a.close();
    }
  },
);

suite('sqlite');
suite('postgres');

test.run();
