/**
 * Several authority instances on one database, started with different keys (SQLite file shared
 * in one process, and PostgreSQL). A start never changes which key another instance signs with:
 * every instance keeps answering 2xx and every grant verifies against the JWKS of every instance
 * (a rolling restart with a new grant key). The Trust Bundle root never changes at start: a
 * different root PEM than the database's is refused (the root changes only through PROTOCOL.md §11).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPublicKey } from 'node:crypto';
import { execFile } from 'node:child_process';
import { generateKeyPair, verifyPolicyGrant, verifyTrustBundle, type PolicyGrant } from '../../src/index.js';
import { GRANT_KEY_LEASE_MS } from '../../authority/keys.js';
import { grantRequest, startTestAuthority, type TestAuthority } from './harness.js';
import { PG_URL, dropSchema, freshSchema, pgAvailable } from '../service-kit/pg-fixture.js';
import { startRefusal } from '../helpers/refused-start.js';

const GRANT_PEM = 'CTL_POLICY_GRANT_SIGNING_PRIVATE_KEY_PEM';
const GRANT_KID = 'CTL_POLICY_GRANT_SIGNING_KEY_ID';
const ROOT_PEM = 'CTL_TRUST_BUNDLE_ROOT_PRIVATE_KEY_PEM';

/** Starts one more instance on the database under test; `now` is the shared clock when given. */
type Open = (env?: Record<string, string>, now?: () => number) => Promise<TestAuthority>;
interface Db {
  open: Open;
  cleanup(): Promise<void>;
}

/** Every instance opened is closed at cleanup, also when a test failed half-way. */
function tracked(start: Open, drop: () => Promise<void>): Db {
  const open = new Set<TestAuthority>();
  return {
    async open(env, now) {
      const t = await start(env, now);
      const close = t.close.bind(t);
      open.add(t);
      t.close = async () => {
        if (open.delete(t)) await close();
      };
      return t;
    },
    async cleanup() {
      for (const t of [...open]) await t.close();
      await drop();
    },
  };
}

const sqliteDb = (): Db => {
  const dir = mkdtempSync(join(tmpdir(), 'ctl-keyfleet-'));
  return tracked(
    (env = {}, now) => startTestAuthority({ dir, keepDir: true, env, ...(now ? { now } : {}) }),
    async () => rmSync(dir, { recursive: true, force: true }),
  );
};
const postgresDb = (): Db => {
  const schema = freshSchema();
  return tracked(
    (env = {}, now) => startTestAuthority({ databaseUrl: PG_URL, schema, env, ...(now ? { now } : {}) }),
    () => dropSchema(schema),
  );
};

const grantEnv = (pem: string, kid?: string): Record<string, string> => ({
  [GRANT_PEM]: pem,
  ...(kid ? { [GRANT_KID]: kid } : {}),
});
const jwksOf = async (t: TestAuthority) => (await t.call('GET', '/.well-known/ctl-keys.json', undefined, null)).body;

interface Issued {
  grant: PolicyGrant;
}

/** POST /grants on `t` must answer 201. */
async function issue(t: TestAuthority): Promise<Issued> {
  const wallet = await generateKeyPair({ alg: 'EdDSA' });
  const r = await t.call('POST', '/grants', await grantRequest(t, wallet.publicJwk));
  assert.is(r.status, 201, `POST /grants answered ${r.status}: ${JSON.stringify(r.body)}`);
  return { grant: r.body };
}

/** Every grant verifies (signature by its keyId, expiry) against the JWKS each instance serves now. */
async function allVerify(issued: Issued[], instances: TestAuthority[], now: () => number = Date.now): Promise<void> {
  for (const t of instances) {
    const jwks = await jwksOf(t);
    for (const { grant } of issued) {
      const r = await verifyPolicyGrant(grant, { jwks, now });
      assert.ok(r.valid, `grant signed with ${grant.keyId} against ${t.url}'s JWKS: ${JSON.stringify(r)}`);
    }
  }
}

const startError = startRefusal;

function scenarios(name: string, makeDb: () => Db): void {
  const it = (title: string, body: (db: Db) => Promise<void>) =>
    test(`${name}: ${title}`, async () => {
      const db = makeDb();
      try {
        await body(db);
      } finally {
        await db.cleanup();
      }
    });

  it('a second instance with another grant key leaves the first signing with its own; both keys published', async ({
    open,
  }) => {
    const k1 = await generateKeyPair({ alg: 'EdDSA' });
    const k2 = await generateKeyPair({ alg: 'EdDSA' });
    const a = await open(grantEnv(k1.privateKeyPem, 'g1'));
    const issued = [await issue(a)];
    const b = await open(grantEnv(k2.privateKeyPem, 'g2'));
    try {
      for (let i = 0; i < 3; i++) {
        const fromA = await issue(a);
        const fromB = await issue(b);
        assert.is(fromA.grant.keyId, 'g1');
        assert.is(fromB.grant.keyId, 'g2');
        issued.push(fromA, fromB);
      }
      const [ja, jb] = [await jwksOf(a), await jwksOf(b)];
      assert.equal(ja, jb, 'instances on one database publish one JWKS');
      assert.equal(ja.keys.map((k: { kid: string; status: string }) => [k.kid, k.status]).sort(), [
        ['g1', 'active'],
        ['g2', 'active'],
      ]);
      await allVerify(issued, [a, b]);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('rolling restart onto a new grant key: every instance answers 2xx and every grant verifies at every step', async ({
    open,
  }) => {
    const k1 = await generateKeyPair({ alg: 'EdDSA' });
    const k2 = await generateKeyPair({ alg: 'EdDSA' });
    let a = await open(grantEnv(k1.privateKeyPem));
    let b = await open(grantEnv(k1.privateKeyPem));
    const issued = [await issue(a), await issue(b)];
    try {
      await a.close();
      a = await open(grantEnv(k2.privateKeyPem)); // A restarted with the new key, B still on the old
      issued.push(await issue(a), await issue(b));
      assert.is.not(issued[2].grant.keyId, issued[3].grant.keyId);
      await allVerify(issued, [a, b]);
      await b.close();
      b = await open(grantEnv(k2.privateKeyPem));
      issued.push(await issue(a), await issue(b));
      await allVerify(issued, [a, b]);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it(
    'an instance with a stored (generated) key keeps it when one with a key from the environment ' +
      'starts, and rotation moves only the stored key',
    async ({ open }) => {
      const k2 = await generateKeyPair({ alg: 'EdDSA' });
      const a = await open();
      const stored = (await issue(a)).grant.keyId;
      const b = await open(grantEnv(k2.privateKeyPem, 'env-2'));
      try {
        const issued = [await issue(a), await issue(b)];
        assert.is(issued[0].grant.keyId, stored);
        assert.is(issued[1].grant.keyId, 'env-2');
        // Rotation is of the database's stored key, whichever instance is asked: both agree.
        for (const via of [b, a]) {
          const rot = await via.call('POST', '/admin/keys/rotate');
          assert.is(rot.status, 201, JSON.stringify(rot.body));
          const fromA = await issue(a);
          const fromB = await issue(b);
          assert.is(fromA.grant.keyId, rot.body.kid, 'A picks the rotated key up from the database');
          assert.is(fromB.grant.keyId, 'env-2', 'a rotation never touches a key from the environment');
          issued.push(fromA, fromB);
        }
        await allVerify(issued, [a, b]);
        assert.equal(await jwksOf(a), await jwksOf(b));
      } finally {
        await a.close();
        await b.close();
      }
    },
  );

  it('keys only from the environment: rotation is refused (409) by every instance, naming the variable', async ({
    open,
  }) => {
    const k1 = await generateKeyPair({ alg: 'EdDSA' });
    const a = await open(grantEnv(k1.privateKeyPem));
    try {
      const r = await a.call('POST', '/admin/keys/rotate');
      assert.is(r.status, 409);
      assert.match(r.body.error.message, GRANT_PEM);
      await issue(a);
    } finally {
      await a.close();
    }
  });

  it(
    'an instance without the grant variable is refused on a database whose grant keys ' +
      'come from it; the others keep answering',
    async ({ open }) => {
      const k1 = await generateKeyPair({ alg: 'EdDSA' });
      const a = await open(grantEnv(k1.privateKeyPem, 'g1'));
      try {
        const message = await startError(() => open());
        assert.match(message, GRANT_PEM);
        assert.not.match(message, '\n');
        assert.is((await issue(a)).grant.keyId, 'g1');
      } finally {
        await a.close();
      }
    },
  );

  it(
    "a different Trust Bundle root than the database's is refused at start, in one line " +
      'naming the variable and §11; the root is unchanged',
    async ({ open }) => {
      const r1 = await generateKeyPair({ alg: 'EdDSA' });
      const r2 = await generateKeyPair({ alg: 'EdDSA' });
      const a = await open({ [ROOT_PEM]: r1.privateKeyPem });
      try {
        const message = await startError(() => open({ [ROOT_PEM]: r2.privateKeyPem }));
        assert.match(message, ROOT_PEM);
        assert.match(message, '§11');
        assert.not.match(message, '\n');
        // Without the variable, on a database whose root comes from it: refused too (it could not sign bundles).
        assert.match(await startError(() => open()), ROOT_PEM);
        // A still signs bundles with the root the devices pinned.
        const bundle = await a.call('POST', '/trust-bundles', {
          scope: { region: 'eu' },
          expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
        });
        assert.is(bundle.status, 201);
        const rootPem = createPublicKey(r1.privateKeyPem).export({ type: 'spki', format: 'pem' }).toString();
        assert.ok((await verifyTrustBundle(bundle.body, rootPem)).valid);
        assert.is((await a.authority.keys.rootSigner()).publicKeyPem, rootPem);
        // The same root again starts.
        const again = await open({ [ROOT_PEM]: r1.privateKeyPem });
        await again.close();
      } finally {
        await a.close();
      }
    },
  );

  it('a root PEM on a database whose root was generated is refused too', async ({ open }) => {
    const a = await open();
    const before = (await a.authority.keys.rootSigner()).publicKeyPem;
    try {
      const r2 = await generateKeyPair({ alg: 'EdDSA' });
      const message = await startError(() => open({ [ROOT_PEM]: r2.privateKeyPem }));
      assert.match(message, ROOT_PEM);
      assert.match(message, '§11');
      assert.is((await a.authority.keys.rootSigner()).publicKeyPem, before);
    } finally {
      await a.close();
    }
  });

  it('a key from the environment stays published while an instance holds it, then only while its grants live', async ({
    open,
  }) => {
    let clock = Date.now();
    const now = () => clock;
    const k1 = await generateKeyPair({ alg: 'EdDSA' });
    const k2 = await generateKeyPair({ alg: 'EdDSA' });
    const k3 = await generateKeyPair({ alg: 'EdDSA' });
    const a = await open(grantEnv(k1.privateKeyPem, 'g1'), now);
    const b = await open(grantEnv(k2.privateKeyPem, 'g2'), now);
    const c = await open(grantEnv(k3.privateKeyPem, 'g3'), now);
    try {
      const fromB = await issue(b); // g2 signs a grant (expires in an hour); g3 signs none
      await b.close();
      await c.close();
      clock += GRANT_KEY_LEASE_MS / 2;
      await a.authority.keys.renewLease();
      const kids = async () =>
        (await jwksOf(a)).keys.map((k: { kid: string; status: string }) => `${k.kid}:${k.status}`).sort();
      assert.equal(await kids(), ['g1:active', 'g2:active', 'g3:active'], 'held within the lease');
      clock += GRANT_KEY_LEASE_MS;
      await a.authority.keys.renewLease();
      assert.equal(await kids(), ['g1:active', 'g2:retired'], 'no instance holds g2 or g3: g2 stays for its grant');
      await allVerify([fromB, await issue(a)], [a], now);
    } finally {
      await a.close();
    }
  });
}

scenarios('SQLite', sqliteDb);

test(
  "SQLite: `ctl authority` with another root on the running instance's database exits " +
    'non-zero with the refusal; the instance is unaffected',
  async () => {
    const db = sqliteDb();
    try {
      const r1 = await generateKeyPair({ alg: 'EdDSA' });
      const r2 = await generateKeyPair({ alg: 'EdDSA' });
      const a = await db.open({ [ROOT_PEM]: r1.privateKeyPem });
      const env = {
        ...process.env,
        PORT: '0',
        DATABASE_URL: `sqlite:${join(a.dir, 'authority.db')}`,
        LOG_LEVEL: 'silent',
        [ROOT_PEM]: r2.privateKeyPem,
      };
      const exit = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
        const child = execFile(
          process.execPath,
          [join(process.cwd(), 'bin', 'ctl.mjs'), 'authority'],
          { env, timeout: 20_000 },
          (e, _out, stderr) => resolve({ code: e ? (typeof e.code === 'number' ? e.code : -1) : 0, stderr }),
        );
        child.stdin?.end();
      });
      assert.is.not(exit.code, 0, 'the process must not start');
      assert.match(exit.stderr, `${ROOT_PEM} is not the Trust Bundle root key stored in the database`);
      assert.match(exit.stderr, 'PROTOCOL.md §11');
      const bundle = await a.call('POST', '/trust-bundles', {
        scope: {},
        expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
      });
      assert.is(bundle.status, 201);
      assert.ok(
        (
          await verifyTrustBundle(
            bundle.body,
            createPublicKey(r1.privateKeyPem).export({ type: 'spki', format: 'pem' }).toString(),
          )
        ).valid,
      );
    } finally {
      await db.cleanup();
    }
  },
);

if (!(await pgAvailable())) {
  console.log(`SKIPPED key fleet on PostgreSQL: ${PG_URL} is unreachable`);
} else {
  scenarios('PostgreSQL', postgresDb);

  test('PostgreSQL: two first starts with different roots at once: exactly one starts', async () => {
    const db = postgresDb();
    try {
      const [r1, r2] = await Promise.all([generateKeyPair({ alg: 'EdDSA' }), generateKeyPair({ alg: 'EdDSA' })]);
      const results = await Promise.allSettled([
        db.open({ [ROOT_PEM]: r1.privateKeyPem }),
        db.open({ [ROOT_PEM]: r2.privateKeyPem }),
      ]);
      assert.is(results.filter((r) => r.status === 'fulfilled').length, 1, results.map((r) => r.status).join());
      const refused = results.find((r): r is PromiseRejectedResult => r.status === 'rejected')!;
      assert.match((refused.reason as Error).message, ROOT_PEM);
      for (const r of results) if (r.status === 'fulfilled') await r.value.close();
    } finally {
      await db.cleanup();
    }
  });
}

test.run();
