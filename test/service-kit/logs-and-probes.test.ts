/**
 * Logs and probes of both services: /readyz answers one shape on the authority and the gateway
 * ({ status, checks: { database, keys } }, 200 or 503), and an upstream failure (502) is logged
 * at warn, as one JSON line with its code and no stack.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { Writable } from 'node:stream';
import { createLogger } from '../../service-kit/index.js';
import { startTestAuthority } from '../authority/harness.js';
import { createSession, proxy, sqliteDb, startTestGateway } from '../gateway/helpers.js';

test('/readyz: the same shape on the authority and the gateway, 503 naming the failed check', async () => {
  const authority = await startTestAuthority();
  const gateway = await startTestGateway(sqliteDb());
  try {
    const ready = { status: 'ok', checks: { database: 'ok', keys: 'ok' } };
    const a = await fetch(`${authority.url}/readyz`);
    const g = await fetch(`${gateway.url}/readyz`);
    assert.is(a.status, 200);
    assert.is(g.status, 200);
    assert.equal(await a.json(), ready);
    assert.equal(await g.json(), ready);
    // The database stops answering (fault injected on the very object the route holds).
    authority.authority.store.ping = async () => false;
    gateway.db.ping = async () => {
      throw new Error('connection lost');
    };
    for (const url of [authority.url, gateway.url]) {
      const r = await fetch(`${url}/readyz`);
      assert.is(r.status, 503, url);
      const body = (await r.json()) as { status: string; checks: Record<string, string> };
      assert.is(body.status, 'unavailable', url);
      assert.is(body.checks.database, 'failed', url);
      assert.equal(Object.keys(body.checks).sort(), ['database', 'keys'], url);
    }
  } finally {
    await authority.close();
    await gateway.close();
  }
});

test('an upstream 502 is logged at warn with its code, without a stack', async () => {
  let text = '';
  const sink = new Writable({ write: (chunk, _enc, done) => ((text += chunk), done()) });
  const logger = createLogger({ name: 'ctl-gateway', level: 'info', destination: sink });
  const gateway = await startTestGateway(sqliteDb(), { logger });
  try {
    const { sessionToken } = await createSession(gateway);
    // A closed port on loopback: the merchant is down.
    const down = await import('node:net').then(
      ({ createServer }) =>
        new Promise<number>((resolve) => {
          const s = createServer().listen(0, '127.0.0.1', () => {
            const port = (s.address() as { port: number }).port;
            s.close(() => resolve(port));
          });
        }),
    );
    const r = await proxy(gateway, sessionToken, `http://127.0.0.1:${down}/data`, { purpose: 'api:search' });
    assert.is(r.status, 502, r.text);
    assert.is(r.body.error.code, 'upstream_error');
    const lines = text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, any>);
    const failure = lines.filter((l) => l.code === 'upstream_error');
    assert.is(failure.length, 1, text);
    assert.is(failure[0]!.level, 40, 'warn');
    assert.not.ok(
      lines.some((l) => l.level >= 50),
      `nothing at error:\n${text}`,
    );
    assert.not.match(text, /"stack"|\\n\s+at /);
  } finally {
    await gateway.close();
  }
});

test.run();
