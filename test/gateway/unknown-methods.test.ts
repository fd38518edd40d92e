/**
 * A method no route implements (PROPFIND, PURGE, LOCK: methods Node parses, the routers do not
 * know) is `405 method_not_allowed` on both services, logged with the request at info, never a
 * 501 `malformed` with a stack at error level.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { request } from 'node:http';
import { pino } from 'pino';
import { sqliteDb, startTestGateway, type TestGateway, type TestDb } from './helpers.js';
import { startTestAuthority, type TestAuthority } from '../authority/harness.js';

const lines: { level: number; msg?: string; status?: number; method?: string }[] = [];
const logger = pino({ level: 'debug' }, { write: (s: string) => void lines.push(JSON.parse(s)) });

let db: TestDb;
let gw: TestGateway;
let authority: TestAuthority;

test.before(async () => {
  db = sqliteDb();
  gw = await startTestGateway(db, { logger });
  authority = await startTestAuthority({ logger });
});
test.after(async () => {
  await gw.close();
  await authority.close();
  await db.drop();
});

/** One raw request (fetch refuses some of these methods). */
function send(
  base: string,
  method: string,
  path: string,
): Promise<{ status: number; body: any; allow: string | undefined }> {
  return new Promise((resolve, reject) => {
    const u = new URL(path, base);
    const r = request({ host: u.hostname, port: u.port, method, path: u.pathname }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {}
        resolve({ status: res.statusCode ?? 0, body, allow: res.headers.allow });
      });
    });
    r.on('error', reject);
    r.end();
  });
}

for (const [service, base, paths] of [
  ['gateway', () => gw.url, ['/healthz', '/sessions', '/admin/owners']],
  ['authority', () => authority.url, ['/healthz', '/grants']],
] as const) {
  test(`${service}: an unknown method is 405 method_not_allowed, logged at info without a stack`, async () => {
    for (const path of paths) {
      for (const method of ['PROPFIND', 'PURGE', 'LOCK']) {
        lines.length = 0;
        const res = await send(base(), method, path);
        assert.is(res.status, 405, `${method} ${path}: ${JSON.stringify(res.body)}`);
        assert.is(res.body.error.code, 'method_not_allowed');
        assert.match(res.body.error.message, new RegExp(method));
        await new Promise((r) => setImmediate(r));
        const loud = lines.filter((l) => l.level >= 40);
        assert.equal(loud, [], `${method} ${path} logged above info`);
        // The authority's request log (the gateway's is server.ts's): one line at info, or debug for its quiet probe
        // paths.
        if (service === 'authority')
          assert.ok(
            lines.some((l) => l.level === (path === '/healthz' ? 20 : 30) && l.method === method && l.status === 405),
            `${method} ${path}: the request line`,
          );
      }
    }
  });
}

test.run();
