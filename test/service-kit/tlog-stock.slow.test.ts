/**
 * The log as a stock client reads it: Go's golang.org/x/mod/sumdb/note and sumdb/tlog (Debian's
 * golang-go and golang-golang-x-mod-dev) follow a log served by service-kit/tlog's routes with
 * only its vkey, check every tile against the signed root, prove every entry from the entry
 * bundles, and check the served inclusion and consistency proofs (tlog-stock/verify.go).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Koa from 'koa';
import Router from '@koa/router';
import { errorMiddleware, listen, migrate, openDatabase } from '../../service-kit/index.js';
import {
  createTransparencyLog,
  generateNoteSigner,
  logRoutes,
  serviceLogMigrations,
} from '../../service-kit/tlog/index.js';
import { repoRoot } from '../helpers/vectors.js';

function run(cmd: string, args: string[], cwd: string, env: Record<string, string>) {
  return new Promise<{ code: number | null; out: string }>((resolve) => {
    const c = spawn(cmd, args, { cwd, env: { ...process.env, ...env } });
    let out = '';
    c.stdout.on('data', (d) => (out += d));
    c.stderr.on('data', (d) => (out += d));
    c.on('close', (code) => resolve({ code, out }));
    c.on('error', (e) => resolve({ code: -1, out: String(e) }));
  });
}

test("Go's sumdb note and tlog verify a served log of 700 entries", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ctl-tlog-stock-'));
  const db = await openDatabase(`sqlite:${join(dir, 'log.db')}`);
  try {
    await migrate(db, serviceLogMigrations('s_log'));
    const signer = await generateNoteSigner('stock.example/ctl-log');
    const log = createTransparencyLog({ db, prefix: 's_log', signer });
    const add = (from: number, to: number) =>
      db.tx(async (q) => {
        for (let i = from; i < to; i++) await log.append(q, { type: 'thing', body: { i, pad: 'y'.repeat(i % 50) } });
      });
    await add(0, 300);
    await log.publish();
    await add(300, 700);
    await log.publish();
    const router = new Router();
    logRoutes(router, { log });
    const app = new Koa();
    app.use(errorMiddleware({}));
    app.use(router.routes());
    const srv = await listen(app, { port: 0 });
    try {
      const r = await run(
        '/usr/lib/go/bin/go',
        ['run', 'verify.go', srv.url, signer.vkey, '300'],
        join(repoRoot, 'test/service-kit/tlog-stock'),
        { GO111MODULE: 'off', GOPATH: '/usr/share/gocode', GOCACHE: join(dir, 'gocache'), GOFLAGS: '' },
      );
      assert.is(r.out.trim(), 'ok 700', r.out);
      assert.is(r.code, 0);
    } finally {
      await srv.close();
      await log.close();
    }
  } finally {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
