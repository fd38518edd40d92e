/**
 * Both services build their app the same way: `createAuthorityApp(deps)` and
 * `createGatewayApp(deps, parts)` touch no database, start no timer or worker and listen on
 * nothing. Migrations, background work and listening belong to each server.ts (the gateway's
 * startGatewayWork, the authority's createAuthority).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase, silentLogger, type SqlDatabase } from '../../service-kit/index.js';
import { aesKeyWrapper, createSealer } from '../../service-kit/secrets/index.js';
import { createGatewayApp } from '../../gateway/app.js';
import { prepareGateway, startGatewayWork } from '../../gateway/server.js';
import { createAuthorityApp } from '../../authority/app.js';
import { createKeyRing } from '../../authority/keys.js';
import { openAuthorityStore } from '../../authority/store/open.js';
import type { AuthorityStore } from '../../authority/store/types.js';

const dir = mkdtempSync(join(tmpdir(), 'ctl-inert-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));

/** `target` with every method call recorded in `calls` (and still made). */
function recorded<T extends object>(target: T, calls: string[]): T {
  return new Proxy(target, {
    get(t, p, r) {
      const v = Reflect.get(t, p, r);
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => {
        calls.push(String(p));
        return (v as (...a: unknown[]) => unknown).apply(t, args);
      };
    },
  });
}

/** The process's lasting handles by kind (sockets, servers, referenced timers…); one-shot immediates left out. */
function resources(): Map<string, number> {
  const m = new Map<string, number>();
  for (const r of process.getActiveResourcesInfo()) if (r !== 'Immediate') m.set(r, (m.get(r) ?? 0) + 1);
  return m;
}

function added(before: Map<string, number>, after: Map<string, number>): string[] {
  return [...after].filter(([k, n]) => n > (before.get(k) ?? 0)).map(([k, n]) => `${k} +${n - (before.get(k) ?? 0)}`);
}

/**
 * Timers and intervals set while `live` is watching and neither fired nor cleared yet: the
 * services unref theirs, which hides them from getActiveResourcesInfo.
 */
function watchTimers() {
  const g = globalThis as any;
  const saved = {
    setTimeout: g.setTimeout,
    setInterval: g.setInterval,
    clearTimeout: g.clearTimeout,
    clearInterval: g.clearInterval,
  };
  const live = new Set<unknown>();
  g.setTimeout = (fn: (...a: unknown[]) => void, ms?: number, ...args: unknown[]) => {
    const t = saved.setTimeout(
      (...a: unknown[]) => {
        live.delete(t);
        fn(...a);
      },
      ms,
      ...args,
    );
    live.add(t);
    return t;
  };
  g.setInterval = (fn: (...a: unknown[]) => void, ms?: number, ...args: unknown[]) => {
    const t = saved.setInterval(fn, ms, ...args);
    live.add(t);
    return t;
  };
  g.clearTimeout = (t: unknown) => {
    live.delete(t);
    saved.clearTimeout(t);
  };
  g.clearInterval = (t: unknown) => {
    live.delete(t);
    saved.clearInterval(t);
  };
  return {
    live: () => live.size,
    stop: () => Object.assign(g, saved),
  };
}

const tick = () => new Promise((r) => setImmediate(r));

async function tables(db: SqlDatabase): Promise<string[]> {
  const rows = await db.all<{ name: string }>(`SELECT name FROM sqlite_master WHERE type = 'table'`);
  return rows.map((r) => r.name);
}

test('createGatewayApp on an empty database: no statement, no table, no timer', async () => {
  // The parts come from a prepared database; the app is built on another, empty one.
  const prepared = await openDatabase(`sqlite:${join(dir, 'prepared.db')}`);
  const parts = await prepareGateway({ db: prepared, logger: silentLogger() });
  const empty = await openDatabase(`sqlite:${join(dir, 'empty.db')}`);
  const calls: string[] = [];
  const before = resources();
  const timers = watchTimers();
  const gw = createGatewayApp({ db: recorded(empty, calls), logger: silentLogger() }, parts);
  await tick();
  timers.stop();
  assert.is(timers.live(), 0, 'timers set by building the app');
  assert.equal(added(before, resources()), [], 'handles added by building the app');
  assert.equal(calls, [], 'database calls made by building the app');
  assert.equal(await tables(empty), [], 'tables made by building the app');
  assert.type(gw.app.callback(), 'function');
  await gw.close();
  await empty.close();
  await prepared.close();
});

test("server.ts's startGatewayWork begins the work; stop() and the app's close() end it", async () => {
  const db = await openDatabase(`sqlite:${join(dir, 'started.db')}`);
  const gw = createGatewayApp({ db, logger: silentLogger() }, await prepareGateway({ db, logger: silentLogger() }));
  const timers = watchTimers();
  try {
    const work = await startGatewayWork(gw, { logger: silentLogger() });
    assert.ok(timers.live() > 0, 'startGatewayWork set no timer');
    work.stop();
    await gw.close();
    await tick();
    assert.is(timers.live(), 0, 'timers left after stop() and close()');
  } finally {
    timers.stop();
  }
  await db.close();
});

test('createAuthorityApp: no store call, no timer', async () => {
  const store = await openAuthorityStore(`sqlite:${join(dir, 'authority.db')}`);
  const sealer = createSealer(aesKeyWrapper(randomBytes(32), 'test KEK'), 'CTL_AUTHORITY_KEK');
  const keys = createKeyRing({ store, logger: silentLogger(), now: Date.now, sealer });
  const calls: string[] = [];
  const before = resources();
  const timers = watchTimers();
  const app = createAuthorityApp({
    store: recorded<AuthorityStore>(store, calls),
    keys,
    issuer: 'inert.test',
    revocationBaseUrl: 'http://127.0.0.1:1',
    logger: silentLogger(),
  });
  await tick();
  timers.stop();
  assert.is(timers.live(), 0, 'timers set by building the app');
  assert.equal(added(before, resources()), [], 'handles added by building the app');
  assert.equal(calls, [], 'store calls made by building the app');
  assert.type(app.callback(), 'function');
  await store.close();
});

test.run();
