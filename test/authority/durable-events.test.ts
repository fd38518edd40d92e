/**
 * Durable audit events (spec §4.3, §6): every audit entry is written with the change it records,
 * and its webhook delivery with it (the outbox). An authority process is SIGKILLed with
 * deliveries pending and the receiver down; after a restart and the receiver coming up, every
 * entry arrives with the webhook-id it was given (none new). SQLite, and two processes on one
 * PostgreSQL (one unforked chain, each id attempted by one instance at a time).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { fileURLToPath } from 'node:url';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createAuditLog,
  generateWebhookSecret,
  openDatabase,
  verifyWebhook,
  type SqlDatabase,
} from '../../service-kit/index.js';
import { ADMIN_KEY, startTestAuthority } from './harness.js';
import { generateKeyPair } from '../../src/index.js';
import { rotatedRoot } from '../helpers/root-chain.js';
import { PG_URL, dropSchema, freshSchema, pgAvailable } from '../service-kit/pg-fixture.js';
import { downReceiver, kill, startChild, waitFor } from '../helpers/webhook-receiver.js';

const FIXTURE = fileURLToPath(new URL('./outbox-process.js', import.meta.url));

const post = async (base: string, path: string, body: unknown) => {
  const res = await fetch(base + path, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as any };
};

async function killAndResume(
  databaseUrl: string,
  open: () => Promise<SqlDatabase>,
  extraEnv: Record<string, string>,
  instances: number,
) {
  const hook = await downReceiver();
  const secret = generateWebhookSecret();
  const env = {
    DATABASE_URL: databaseUrl,
    CTL_AUDIT_WEBHOOK_URLS: hook.url,
    CTL_AUDIT_WEBHOOK_SECRET: secret,
    CTL_WEBHOOK_BASE_DELAY_MS: '100',
    CTL_WEBHOOK_MAX_DELAY_MS: '400',
    CTL_WEBHOOK_MAX_ATTEMPTS: '1000',
    CTL_WEBHOOK_POLL_MS: '100',
    CTL_WEBHOOK_TIMEOUT_MS: '1000',
    ...extraEnv,
  };
  // Started one after another: the first creates the schema and the keys.
  const start = async () => {
    const out = [];
    for (let i = 0; i < instances; i++) out.push(await startChild(FIXTURE, env));
    return out;
  };
  let procs = await start();
  const reader = await open();
  try {
    for (let i = 0; i < 6; i++)
      assert.is((await post(procs[i % instances].url, '/policies', { policy: { n: i } })).status, 201);
    const key = await post(procs[0].url, '/admin/keys', { scopes: ['grants:write'], label: 'k' });
    assert.is(key.status, 201);
    const rows = () =>
      reader.all<{ message_id: string; status: string; attempts: number | string }>(
        'SELECT message_id, status, attempts FROM webhook_dispatches',
      );
    await waitFor('failed first attempts', async () => {
      const r = await rows();
      return r.length === 7 && r.every((x) => x.status === 'pending' && Number(x.attempts) >= 1);
    });
    const ids = new Set((await rows()).map((r) => r.message_id));
    assert.is(ids.size, 7);

    await Promise.all(procs.map((p) => kill(p.child)));
    procs = await start();
    await hook.up();
    await waitFor('every delivery', async () => (await rows()).every((x) => x.status === 'delivered'));

    assert.equal(hook.ids(), ids, 'every entry arrived, none with a new id');
    assert.is(hook.maxConcurrentPerId, 1);
    const seqs = new Set(
      hook.got.map((d) => {
        assert.ok(verifyWebhook(secret, d.headers as Record<string, string>, d.body));
        const b = JSON.parse(d.body) as { type: string; data: { seq: number } };
        assert.is(b.type, 'audit.appended');
        return b.data.seq;
      }),
    );
    assert.equal(
      [...seqs].sort((a, b) => a - b),
      [1, 2, 3, 4, 5, 6, 7],
    );
    const v = await createAuditLog(reader, 'audit_log').verify();
    assert.ok(v.ok && v.count === 7, JSON.stringify(v));
  } finally {
    await Promise.all(procs.map((p) => kill(p.child)));
    await reader.close();
    await hook.close();
  }
}

test(
  'SQLite: SIGKILL with audit deliveries pending and the receiver down; after restart ' +
    'every entry arrives with its id',
  async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ctl-durable-'));
    const url = `sqlite:${join(dir, 'authority.db')}`;
    try {
      await killAndResume(url, () => openDatabase(url), { CTL_TEST_DIR: dir }, 1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

test(
  'PostgreSQL, two processes: SIGKILL both with deliveries pending; every entry arrives ' + 'once per id, one chain',
  async () => {
    if (!(await pgAvailable())) return console.log('SKIPPED: no PostgreSQL at', PG_URL);
    const schema = freshSchema();
    const dir = mkdtempSync(join(tmpdir(), 'ctl-durable-'));
    try {
      await killAndResume(
        PG_URL,
        () => openDatabase(PG_URL, { schema }),
        { CTL_TEST_PG_SCHEMA: schema, CTL_TEST_DIR: dir },
        2,
      );
    } finally {
      await dropSchema(schema);
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

test('a change whose audit entry cannot be written does not commit, nor does its delivery', async () => {
  const hook = await downReceiver();
  const t = await startTestAuthority({
    env: { CTL_AUDIT_WEBHOOK_URLS: hook.url, CTL_AUDIT_WEBHOOK_SECRET: generateWebhookSecret() },
  });
  const side = await openDatabase(`sqlite:${join(t.dir, 'authority.db')}`);
  try {
    await side.exec(
      `CREATE TRIGGER no_audit BEFORE INSERT ON audit_log BEGIN SELECT RAISE(ABORT, 'audit refused'); END`,
    );
    assert.is((await t.call('POST', '/admin/keys', { scopes: ['grants:write'], label: 'unrecorded' })).status, 500);
    assert.is((await t.call('POST', '/policies', { policy: { unrecorded: true } })).status, 500);
    assert.equal((await t.call('GET', '/admin/keys')).body.keys, [], 'the key was not stored without its entry');
    assert.equal(await side.all('SELECT policy_hash FROM policies'), []);
    assert.equal(await side.all('SELECT id FROM webhook_dispatches'), [], 'nor delivered');
    await side.exec(`DROP TRIGGER no_audit`);
    assert.is((await t.call('POST', '/policies', { policy: { recorded: true } })).status, 201);
    assert.is((await side.all('SELECT id FROM webhook_dispatches')).length, 1);
  } finally {
    await side.close();
    await t.close();
    await hook.close();
  }
});

test('a key rotation or a root statement whose audit entry cannot be written does not take effect', async () => {
  const root1 = await generateKeyPair({ alg: 'EdDSA' });
  const chain = await rotatedRoot({ root: root1 });
  const t = await startTestAuthority({ env: { CTL_TRUST_BUNDLE_ROOT_PRIVATE_KEY_PEM: root1.privateKeyPem } });
  const side = await openDatabase(`sqlite:${join(t.dir, 'authority.db')}`);
  const grantKids = async () =>
    (
      (await t.call('GET', '/.well-known/ctl-keys.json', undefined, null)).body.keys as Array<{
        kid: string;
        use?: string;
      }>
    )
      .map((k) => k.kid)
      .sort();
  try {
    const kidsBefore = await grantKids();
    await side.exec(
      `CREATE TRIGGER no_audit BEFORE INSERT ON audit_log BEGIN SELECT RAISE(ABORT, 'audit refused'); END`,
    );
    assert.is((await t.call('POST', '/admin/keys/rotate')).status, 500);
    assert.equal(
      await side
        .all(`SELECT kid FROM signing_keys WHERE purpose = 'grant' AND status = 'active'`)
        .then((r) => r.length),
      1,
    );
    assert.equal(await grantKids(), kidsBefore, 'no key was activated without its entry');
    assert.is((await t.call('POST', '/trust-root', { statement: chain.s2 })).status, 500);
    assert.equal(
      (await t.call('GET', '/trust-root', undefined, null)).body,
      { statements: [] },
      'no statement was published without its entry',
    );
    await side.exec(`DROP TRIGGER no_audit`);
    assert.is((await t.call('POST', '/admin/keys/rotate')).status, 201);
    assert.is((await t.call('POST', '/trust-root', { statement: chain.s2 })).status, 201);
    const actions = ((await t.call('GET', '/audit')).body.entries as Array<{ action: string }>).map((e) => e.action);
    assert.ok(actions.includes('key.rotate') && actions.includes('root.rotate'), actions.join());
  } finally {
    await side.close();
    await t.close();
  }
});

test.run();
