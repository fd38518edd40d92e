/**
 * The restore drill on SQLite (docs/operations.md "Backups", "Restoring a backup"): an online
 * backup taken while the gateway pays; a fresh instance on a copy of it opens its sealed keys with
 * the same KEK, serves the same session and receipts, and answers a paid request retried with
 * its Idempotency-Key from the stored answer (the merchant is not paid again). The same backup
 * put back where a newer database was is refused at start (the high-water mark is ahead of it)
 * until the operator consents, by option and through `ctl gateway` (exit 3, then serving); the
 * transparency log's newest checkpoint, kept beside that mark, refuses it too on its own.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { aesKeyWrapper, createSealer } from '../../service-kit/secrets/index.js';
import { backupDatabase } from '../../service-kit/backup.js';
import {
  rollbackFinding,
  RollbackRefusedError,
  type ChainPosition,
  type ChainReader,
  type HighWaterSource,
} from '../../service-kit/rollback-guard.js';
import { silentLogger } from '../../service-kit/index.js';
import { startGateway, type RunningGateway } from '../../gateway/server.js';
import { ADMIN_KEY, call, createSession, proxy, startMerchant, type Merchant } from '../gateway/helpers.js';
import { runCtl } from '../helpers/run-ctl.js';
import { startTestAuthority } from '../authority/harness.js';
import { root as repo } from '../../firmware-bridge/node/device-script.js';
import { freePort } from '../helpers/ports.js';

const kek = randomBytes(32);
const sealer = () => createSealer(aesKeyWrapper(kek, 'CTL_GATEWAY_KEK'), 'CTL_GATEWAY_KEK');

const start = (dbFile: string, rollback: { highWaterFile: string; accept?: boolean }) =>
  startGateway({
    port: 0,
    host: '127.0.0.1',
    databaseUrl: `sqlite:${dbFile}`,
    adminKey: ADMIN_KEY,
    sealer: sealer(),
    logger: silentLogger(),
    targets: { allowPrivate: true },
    rollback: { ...rollback, acceptVariable: 'CTL_GATEWAY_ACCEPT_ROLLBACK' },
  });

test('the check: behind, forked, staged entries and no mark', async () => {
  const chain = (entries: string[], staged = 0): ChainReader => ({
    head: async () =>
      entries.length || staged ? { seq: entries.length, hash: entries.at(-1) ?? '', staged } : undefined,
    hashAt: async (seq) => entries[seq - 1],
  });
  const mark = (p: ChainPosition | undefined): HighWaterSource => ({ name: 'the mark', read: async () => p });
  assert.is(await rollbackFinding(chain(['a', 'b']), [mark(undefined)]), undefined, 'no mark yet: nothing to compare');
  assert.is(await rollbackFinding(chain(['a', 'b']), [mark({ seq: 2, hash: 'b' })]), undefined);
  assert.is(await rollbackFinding(chain(['a', 'b', 'c']), [mark({ seq: 2, hash: 'b' })]), undefined, 'ahead');
  assert.match((await rollbackFinding(chain(['a']), [mark({ seq: 2, hash: 'b' })]))!, 'older backup');
  assert.match((await rollbackFinding(chain([]), [mark({ seq: 1, hash: 'a' })]))!, 'older');
  assert.match((await rollbackFinding(chain(['a', 'x', 'y']), [mark({ seq: 2, hash: 'b' })]))!, 'another history');
  // Staged entries count toward where the chain ends; their hashes are compared once sealed.
  assert.is(await rollbackFinding(chain(['a'], 2), [mark({ seq: 1, hash: 'a', staged: 2 })]), undefined);
  assert.match((await rollbackFinding(chain(['a'], 1), [mark({ seq: 1, hash: 'a', staged: 2 })]))!, 'older');
  assert.is(await rollbackFinding(chain(['a', 'b', 'c']), [mark({ seq: 1, hash: 'a', staged: 2 })]), undefined);
});

/** The authority's check: its audit chain (no staging) against the same kind of mark. */
test('the authority refuses a database behind its mark, and serves with consent', async () => {
  const adir = mkdtempSync(join(tmpdir(), 'ctl-authority-restore-'));
  const highWaterFile = join(adir, 'authority.high-water.json');
  try {
    const a = await startTestAuthority({ dir: adir, keepDir: true, rollback: { highWaterFile } });
    const created = await a.call('POST', '/admin/keys', { label: 'drill', scopes: ['grants:revoke'] });
    assert.is(created.status, 201, JSON.stringify(created.body));
    await a.close();
    const m = JSON.parse(readFileSync(highWaterFile, 'utf8')) as { seq: number; hash: string };
    assert.ok(m.seq >= 1, 'the key creation was audited and recorded');
    // As if the database had been restored to before that entry: the mark is one past its head.
    writeFileSync(highWaterFile, JSON.stringify({ ...m, seq: m.seq + 1 }));
    let refused: unknown;
    try {
      await (await startTestAuthority({ dir: adir, keepDir: true, rollback: { highWaterFile } })).close();
    } catch (e) {
      refused = e;
    }
    assert.instance(refused, RollbackRefusedError);
    const ok = await startTestAuthority({ dir: adir, keepDir: true, rollback: { highWaterFile, accept: true } });
    await ok.close();
    assert.is(JSON.parse(readFileSync(highWaterFile, 'utf8')).seq, m.seq, 'consent resets the mark');
  } finally {
    rmSync(adir, { recursive: true, force: true });
  }
});

/** Where a high-water file says the chain ends: sealed entries, then staged ones. */
const end = (file: string) => {
  const m = JSON.parse(readFileSync(file, 'utf8')) as { seq: number; staged: number };
  return m.seq + m.staged;
};
const urlOf = (g: RunningGateway) => g.server.url.replace(/\/$/, '');

let dir = '';
let merchant: Merchant;

test.before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ctl-restore-'));
  merchant = await startMerchant({ amount: '100' });
});
test.after(async () => {
  await merchant.close();
  rmSync(dir, { recursive: true, force: true });
});

test('a backup restores keys, sessions, receipts and stored answers; an older one is refused', async () => {
  const live = join(dir, 'live', 'gateway.db');
  const mark = join(dir, 'marks', 'gateway.high-water.json');
  const backup = join(dir, 'backup.db');
  let g = await start(live, { highWaterFile: mark });
  const gw = { url: urlOf(g), ownerKey: '' };
  gw.ownerKey = (await call(gw.url, 'POST', '/admin/owners', { key: ADMIN_KEY, body: { label: 'drill' } })).body.apiKey;
  const s = await createSession(gw as never);
  const first = await proxy(gw, s.sessionToken, `${merchant.url}/a`, {
    purpose: 'api:search',
    headers: { 'idempotency-key': 'drill-a' },
  });
  assert.is(first.status, 200, first.text);
  const before = {
    session: (await call(gw.url, 'GET', `/sessions/${s.sessionId}`, { key: gw.ownerKey })).body,
    receipts: (await call(gw.url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: gw.ownerKey })).body.receipts,
    jwks: (await call(gw.url, 'GET', '/.well-known/ctl-keys.json')).body,
  };
  // Online: taken while the gateway runs and its WAL holds the payment.
  await backupDatabase(`sqlite:${live}`, backup);
  // A payment after the backup: the backup is now behind the live database.
  assert.is((await proxy(gw, s.sessionToken, `${merchant.url}/b`, { purpose: 'api:search' })).status, 200);
  await g.close();
  const markAfter = end(mark);
  assert.is(merchant.paid.length, 2);

  // The drill: a fresh instance (its own mark) on a copy of the backup, the same KEK.
  const restored = join(dir, 'restored', 'gateway.db');
  mkdirSync(join(dir, 'restored'));
  copyFileSync(backup, restored);
  g = await start(restored, { highWaterFile: join(dir, 'marks', 'restored.json') });
  const r = { url: urlOf(g), ownerKey: gw.ownerKey };
  try {
    assert.equal((await call(r.url, 'GET', '/.well-known/ctl-keys.json')).body, before.jwks, 'the same keys');
    assert.equal((await call(r.url, 'GET', `/sessions/${s.sessionId}`, { key: r.ownerKey })).body, before.session);
    const receipts = (await call(r.url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: r.ownerKey })).body.receipts;
    assert.equal(receipts, before.receipts, 'the receipts of before the backup, no more');
    // The paid request retried: its stored answer, not a second payment.
    const again = await proxy(r, s.sessionToken, `${merchant.url}/a`, {
      purpose: 'api:search',
      headers: { 'idempotency-key': 'drill-a' },
    });
    assert.is(again.status, 200);
    assert.is(again.headers.get('idempotent-replayed'), 'true');
    assert.is(merchant.paid.length, 2, 'the merchant was not paid again');
    // The session's key opens under the same KEK: it pays on.
    assert.is((await proxy(r, s.sessionToken, `${merchant.url}/c`, { purpose: 'api:search' })).status, 200);
    assert.is(merchant.paid.length, 3);
  } finally {
    await g.close();
  }

  // The backup put back in place of the live database: its mark is ahead, the start is refused.
  copyFileSync(backup, live);
  rmSync(`${live}-wal`, { force: true });
  rmSync(`${live}-shm`, { force: true });
  let refused: unknown;
  try {
    await (await start(live, { highWaterFile: mark })).close();
  } catch (e) {
    refused = e;
  }
  assert.instance(refused, RollbackRefusedError, String(refused));
  assert.match((refused as Error).message, `saw sequence ${markAfter}`);
  assert.match((refused as Error).message, 'CTL_GATEWAY_ACCEPT_ROLLBACK=1');

  // Through the CLI: exit 3 and the message, then serving with the operator's consent.
  const port = await freePort();
  const env = {
    DATABASE_URL: `sqlite:${live}`,
    PORT: String(port),
    CTL_GATEWAY_KEK: kek.toString('base64url'),
    CTL_GATEWAY_HIGH_WATER_FILE: mark,
    LOG_LEVEL: 'silent',
  };
  const cli = await runCtl({ cwd: dir, env }, 'gateway');
  assert.is(cli.code, 3, cli.err);
  assert.match(cli.err, 'restored from an older backup');
  await servesWithConsent({ ...env, CTL_GATEWAY_ACCEPT_ROLLBACK: '1' }, port);
  // Consent resets the mark to the database's head: the next start passes without it.
  assert.ok(end(mark) < markAfter);
});

test("the log's newest checkpoint alone catches an older backup: refused, exit 3, until consent", async () => {
  const live = join(dir, 'log-live', 'gateway.db');
  const mark = join(dir, 'log-marks', 'gateway.high-water.json');
  const logMark = `${mark.replace(/\.json$/, '')}.log-checkpoint`;
  const backup = join(dir, 'log-backup.db');
  const g = await start(live, { highWaterFile: mark });
  const gw = { url: urlOf(g), ownerKey: '' };
  gw.ownerKey = (await call(gw.url, 'POST', '/admin/owners', { key: ADMIN_KEY, body: { label: 'log' } })).body.apiKey;
  const s = await createSession(gw as never);
  assert.is((await proxy(gw, s.sessionToken, `${merchant.url}/a`, { purpose: 'api:search' })).status, 200);
  await g.gateway.log!.log.publish();
  await backupDatabase(`sqlite:${live}`, backup);
  assert.is((await proxy(gw, s.sessionToken, `${merchant.url}/b`, { purpose: 'api:search' })).status, 200);
  const size = (await g.gateway.log!.log.publish()) ?? (await g.gateway.log!.log.checkpoint())!.size;
  await g.close();
  assert.match(readFileSync(logMark, 'utf8'), `\n${size}\n`, 'the newest checkpoint is kept beside the mark');

  // The backup put back, and the audit chain's own mark lost with it: the log's mark still refuses.
  copyFileSync(backup, live);
  rmSync(`${live}-wal`, { force: true });
  rmSync(`${live}-shm`, { force: true });
  rmSync(mark);
  let refused: unknown;
  try {
    await (await start(live, { highWaterFile: mark })).close();
  } catch (e) {
    refused = e;
  }
  assert.instance(refused, RollbackRefusedError, String(refused));
  assert.match((refused as Error).message, `but ${logMark} saw size ${size}`);
  rmSync(mark, { force: true });

  const port = await freePort();
  const env = {
    DATABASE_URL: `sqlite:${live}`,
    PORT: String(port),
    CTL_GATEWAY_KEK: kek.toString('base64url'),
    CTL_GATEWAY_HIGH_WATER_FILE: mark,
    LOG_LEVEL: 'silent',
  };
  const refusedCli = await runCtl({ cwd: dir, env }, 'gateway');
  assert.is(refusedCli.code, 3, refusedCli.err);
  assert.match(refusedCli.err, 'transparency log ends at size');
  await servesWithConsent({ ...env, CTL_GATEWAY_ACCEPT_ROLLBACK: '1' }, port);
  // Consent resets the log's mark to the database's newest checkpoint: the next start passes.
  const again = await start(live, { highWaterFile: mark });
  await again.close();
});

test('a backup never overwrites a file; an in-memory database has none', async () => {
  const f = join(dir, 'exists.db');
  copyFileSync(process.execPath, f);
  await rejects(() => backupDatabase('sqlite:/nowhere/x.db', join(dir, 'n.db')), /no such database/);
  await rejects(() => backupDatabase('sqlite::memory:', join(dir, 'm.db')), /in-memory/);
  await rejects(() => backupDatabase('sqlite:/nowhere/x.db', f), /never overwrites/);
});

test('ctl gateway backup writes a file the gateway opens', async () => {
  const src = join(dir, 'cli-src.db');
  const g = await start(src, { highWaterFile: join(dir, 'marks', 'cli.json') });
  try {
    const out = join(dir, 'cli-backup.db');
    const r = await runCtl({ cwd: dir, env: { DATABASE_URL: `sqlite:${src}` } }, 'gateway', 'backup', '--out', out);
    assert.is(r.code, 0, r.err);
    assert.match(r.err, 'wrote');
    const again = await runCtl({ cwd: dir, env: { DATABASE_URL: `sqlite:${src}` } }, 'gateway', 'backup', '--out', out);
    assert.is(again.code, 1);
    const a = await runCtl({ cwd: dir, env: { DATABASE_URL: `sqlite:${src}` } }, 'authority', 'backup');
    assert.is(a.code, 2, 'without --out: a usage error');
  } finally {
    await g.close();
  }
});

async function rejects(f: () => Promise<unknown>, pattern: RegExp) {
  const e = await f().then(
    () => undefined,
    (x: Error) => x,
  );
  assert.ok(e, `expected a rejection matching ${pattern}`);
  assert.match(e!.message, pattern);
}

/** `ctl gateway` with `env` answers /healthz, then stops on SIGTERM with exit 0. */
async function servesWithConsent(env: Record<string, string>, port: number) {
  const child = spawn(process.execPath, [join(repo, 'bin', 'ctl.mjs'), 'gateway'], {
    cwd: dir,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr.on('data', (d) => (err += d));
  const exited = new Promise<number | null>((r) => child.on('exit', (c) => r(c)));
  try {
    let ok = false;
    for (let i = 0; i < 100 && !ok; i++) {
      await new Promise((r) => setTimeout(r, 100));
      ok = await fetch(`http://127.0.0.1:${port}/healthz`).then(
        (x) => x.status === 200,
        () => false,
      );
    }
    assert.ok(ok, `the gateway serves with consent: ${err}`);
  } finally {
    child.kill('SIGTERM');
  }
  assert.is(await exited, 0, err);
}

test.run();
