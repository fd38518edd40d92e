/**
 * Root rotation at the authority (PROTOCOL.md §11), on SQLite and on PostgreSQL with two
 * instances: GET/POST /trust-root, the chain in the database, bundles signed by the newest
 * version's bundle key, starts refused without it, and a compromised bundle key replaced by a
 * rotation that devices follow without being touched.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createRootStatement,
  generateKeyPair,
  verifyRootChain,
  verifyTrustBundle,
  type GeneratedKeyPair,
} from '../../src/index.js';
import { startTestAuthority, type TestAuthority } from './harness.js';
import { rotate4, rotatedRoot, type RotatedRoot } from '../helpers/root-chain.js';
import { PG_URL, dropSchema, freshSchema, pgAvailable } from '../service-kit/pg-fixture.js';

const run = promisify(execFile);
const expiresAt = () => new Date(Date.now() + 3600_000).toISOString();
const issue = (t: TestAuthority) =>
  t.call('POST', '/trust-bundles', { scope: { region: 'eu' }, expiresAt: expiresAt() });

type Db = { databaseUrl?: string; schema?: string; dir?: string };

async function scenario(db: () => Db, label: string) {
  const root1: GeneratedKeyPair = await generateKeyPair({ alg: 'EdDSA' });
  const r: RotatedRoot = await rotatedRoot({ root: root1 });
  const rootEnv = { CTL_TRUST_BUNDLE_ROOT_PRIVATE_KEY_PEM: root1.privateKeyPem };
  const started: TestAuthority[] = [];
  const start = async (env: Record<string, string>) => {
    const t = await startTestAuthority({ ...db(), keepDir: true, env });
    started.push(t);
    return t;
  };
  try {
    // Version 1: the root signs bundles, the chain is empty.
    const a = await start(rootEnv);
    assert.equal((await a.call('GET', '/trust-root', undefined, null)).body, { statements: [] });
    const b1 = await issue(a);
    assert.is(b1.status, 201);
    assert.ok((await verifyTrustBundle(b1.body, root1.publicKeyPem)).valid);

    // Publishing: admin only, the next link only.
    assert.is((await a.call('POST', '/trust-root', { statement: r.s2 }, null)).status, 401);
    const skipped = await a.call('POST', '/trust-root', { statement: r.s3 });
    assert.is(skipped.status, 400);
    assert.is(skipped.body.error.code, 'root_rotation_invalid');
    const forged = await createRootStatement(
      { rootVersion: 2, keys: [r.r2.publicJwk], threshold: 1, bundleKeys: [r.bk2.publicJwk] },
      { signers: [{ key: r.r2.privateKeyPem }] },
    ); // not signed by the version-1 root
    assert.is((await a.call('POST', '/trust-root', { statement: forged })).body.error?.code, 'root_rotation_invalid');
    assert.is(
      (await a.call('POST', '/trust-root', { statement: { ...r.s2, extra: 1 } })).body.error?.code,
      'malformed',
    );
    assert.is((await a.call('POST', '/trust-root', { statement: r.s2, more: 1 })).status, 400);
    const p2 = await a.call('POST', '/trust-root', { statement: r.s2 });
    assert.is(p2.status, 201, JSON.stringify(p2.body));
    assert.equal([p2.body.rootVersion, p2.body.changed, p2.body.signsBundles], [2, true, false]);
    assert.is(
      (await a.call('POST', '/trust-root', { statement: r.s2 })).status,
      200,
      'the same statement again changes nothing',
    );
    assert.is((await a.call('POST', '/trust-root', { statement: forged })).status, 409);

    // Instance a has no version-2 bundle key: it stops signing bundles rather than sign stale ones.
    const stale = await issue(a);
    assert.is(stale.status, 503);
    assert.match(stale.body.error.message, /bundleKeys/);

    // Starts: refused without a bundle key, refused with one the newest version does not list.
    const refused = async (env: Record<string, string>, why: RegExp) => {
      try {
        await start(env);
        assert.unreachable('the start must be refused');
      } catch (e) {
        assert.match((e as Error).message, why);
      }
    };
    await refused(rootEnv, /CTL_TRUST_BUNDLE_SIGNING_KEY_PEM/);
    await refused(
      { ...rootEnv, CTL_TRUST_BUNDLE_SIGNING_KEY_PEM: r.bk3.privateKeyPem },
      /not one of the bundleKeys of root version 2/,
    );
    // The version-2 bundle key from a file, and no root private key at all (it stays offline).
    const keyFile = join(mkdtempSync(join(tmpdir(), 'ctl-bk-')), 'bundle.key.pem');
    writeFileSync(keyFile, r.bk2.privateKeyPem, { mode: 0o600 });
    const b = await start({ CTL_TRUST_BUNDLE_SIGNING_KEY_FILE: keyFile });
    const chain2 = (await b.call('GET', '/trust-root', undefined, null)).body.statements;
    assert.is(chain2.length, 1);
    const b2 = await issue(b);
    assert.is(b2.status, 201);
    assert.is(b2.body.sequence, b1.body.sequence + 1, 'the sequence comes from the database, whoever signs');
    assert.ok((await verifyTrustBundle(b2.body, root1.publicKeyPem, { rootChain: chain2 })).valid);
    assert.is(
      (await verifyTrustBundle(b2.body, root1.publicKeyPem)).valid,
      false,
      'without the chain: not the pinned root',
    );

    // Version 3 (2-of-3) through instance b; a statement short of the threshold first.
    const short = await createRootStatement(
      {
        rootVersion: 3,
        keys: [r.a.publicJwk, r.b.publicJwk, r.c.publicJwk],
        threshold: 2,
        bundleKeys: [r.bk3.publicJwk],
      },
      { signers: [{ key: r.r2.privateKeyPem }, { key: r.a.privateKeyPem }] },
    );
    assert.is((await b.call('POST', '/trust-root', { statement: short })).body.error?.code, 'root_rotation_invalid');
    assert.is((await b.call('POST', '/trust-root', { statement: r.s3 })).status, 201);
    assert.is(
      (await b.call('POST', '/trust-bundles', { scope: { region: 'eu' }, expiresAt: expiresAt() })).status,
      503,
      'bk2 is retired at version 3',
    );
    const c = await start({ CTL_TRUST_BUNDLE_SIGNING_KEY_PEM: r.bk3.privateKeyPem });
    const chain3 = (await a.call('GET', '/trust-root', undefined, null)).body.statements;
    assert.equal(chain3, [r.s2, r.s3], 'every instance serves the chain of the database');
    const b3 = await issue(c);
    assert.ok((await verifyTrustBundle(b3.body, root1.publicKeyPem, { rootChain: chain3, minRootVersion: 3 })).valid);

    // bk3 leaks: version 4 retires it. Devices are not touched: they get the longer chain with their next bundle.
    const s4 = await rotate4(r);
    assert.is((await c.call('POST', '/trust-root', { statement: s4 })).status, 201);
    assert.is((await issue(c)).status, 503);
    const d = await start({ CTL_TRUST_BUNDLE_SIGNING_KEY_PEM: r.bk4.privateKeyPem });
    const chain4 = (await d.call('GET', '/trust-root', undefined, null)).body.statements;
    const b4 = await issue(d);
    const v4 = await verifyRootChain(root1.publicKeyPem, chain4, { minVersion: 3 });
    assert.ok(v4.valid && v4.rootVersion === 4);
    assert.ok((await verifyTrustBundle(b4.body, root1.publicKeyPem, { rootChain: chain4, minRootVersion: 3 })).valid);
    assert.is(
      (await verifyTrustBundle(b3.body, root1.publicKeyPem, { rootChain: chain4 })).valid,
      false,
      'bk3 bundles are refused at version 4',
    );
    // The rotations are in the audit log.
    const audit = (await d.call('GET', '/audit?limit=1000')).body.entries.filter(
      (e: any) => e.action === 'root.rotate',
    );
    assert.equal(
      audit.map((e: any) => e.data.rootVersion),
      [2, 3, 4],
      label,
    );
    if (label === 'sqlite') {
      // `ctl authority root-key` still prints the pinned version-1 root, with no root private key anywhere.
      const cli = await run(process.execPath, [join(process.cwd(), 'bin', 'ctl.mjs'), 'authority', 'root-key'], {
        env: {
          PATH: process.env['PATH'],
          DATABASE_URL: `sqlite:${join(db().dir!, 'authority.db')}`,
          LOG_LEVEL: 'silent',
        },
      });
      assert.is(cli.stdout, root1.publicKeyPem);
    }
  } finally {
    for (const t of started) await t.close();
  }
}

test('SQLite: publish 2 → 3 → 4, bundles follow the newest bundle key, starts refused without it', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ctl-trust-root-'));
  await scenario(() => ({ dir }), 'sqlite');
});

const pgUp = await pgAvailable();
test('PostgreSQL: the same, each step on a new instance of one schema', async () => {
  if (!pgUp) return console.log(`SKIPPED PostgreSQL: ${PG_URL} is unreachable`);
  const schema = freshSchema();
  try {
    await scenario(() => ({ databaseUrl: PG_URL, schema }), 'postgres');
  } finally {
    await dropSchema(schema);
  }
});

test('PostgreSQL: two instances publishing different version-2 statements at once keep exactly one', async () => {
  if (!pgUp) return;
  const schema = freshSchema();
  const root1 = await generateKeyPair({ alg: 'EdDSA' });
  const env = { CTL_TRUST_BUNDLE_ROOT_PRIVATE_KEY_PEM: root1.privateKeyPem };
  const [a, b] = await Promise.all([
    startTestAuthority({ databaseUrl: PG_URL, schema, env }),
    startTestAuthority({ databaseUrl: PG_URL, schema, env }),
  ]);
  try {
    const one = await rotatedRoot({ root: root1 });
    const two = await rotatedRoot({ root: root1 });
    const answers = await Promise.all([
      a.call('POST', '/trust-root', { statement: one.s2 }),
      b.call('POST', '/trust-root', { statement: two.s2 }),
    ]);
    assert.equal(answers.map((x) => x.status).sort(), [201, 409]);
    const sa = (await a.call('GET', '/trust-root', undefined, null)).body.statements;
    assert.equal(sa, (await b.call('GET', '/trust-root', undefined, null)).body.statements);
    assert.is(sa.length, 1);
  } finally {
    await a.close();
    await b.close();
    await dropSchema(schema);
  }
});

test.run();
