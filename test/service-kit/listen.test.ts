/**
 * service-kit/listen.ts: close() stops accepting, lets a request in flight finish, cuts one that
 * is still busy after the grace period (10 s by default), and a port in use is one message
 * naming the port.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import Koa from 'koa';
import { request } from 'node:http';
import { listen, DEFAULT_CLOSE_GRACE_MS } from '../../service-kit/listen.js';

const get = (url: string) =>
  new Promise<{ status: number; body: string } | { error: string }>((resolve) => {
    request(url, (res) => {
      let body = '';
      res.on('data', (d) => (body += d)).on('end', () => resolve({ status: res.statusCode!, body }));
      res.on('error', (e) => resolve({ error: e.message }));
    })
      .on('error', (e) => resolve({ error: (e as NodeJS.ErrnoException).code ?? e.message }))
      .end();
  });

test(
  'close(): the request in flight finishes, a keep-alive socket does not hold close() ' +
    'open, no new connection is accepted',
  async () => {
    const app = new Koa();
    app.use(async (ctx) => {
      await new Promise((r) => setTimeout(r, 300));
      ctx.body = 'done';
    });
    const srv = await listen(app, { port: 0 });
    const inflight = fetch(srv.url).then(async (r) => ({ status: r.status, body: await r.text() }));
    await new Promise((r) => setTimeout(r, 50));
    const started = Date.now();
    const closed = srv.close();
    assert.equal(await inflight, { status: 200, body: 'done' });
    await closed;
    // fetch keeps its socket alive: close() must not wait for the 5 s keep-alive timeout.
    assert.ok(Date.now() - started < 2000, `closed after ${Date.now() - started} ms`);
    const after = await get(srv.url);
    assert.equal(after, { error: 'ECONNREFUSED' });
  },
);

test('close(): a request still busy after the grace period is cut, and close() resolves', async () => {
  assert.is(DEFAULT_CLOSE_GRACE_MS, 10_000);
  const app = new Koa();
  app.use(() => new Promise(() => {})); // never answers
  const srv = await listen(app, { port: 0 });
  const stuck = get(srv.url);
  await new Promise((r) => setTimeout(r, 50));
  const started = Date.now();
  const result = await Promise.race([
    srv.close({ graceMs: 200 }).then(() => 'closed'),
    new Promise((r) => setTimeout(() => r('still open'), 3000)),
  ]);
  assert.is(result, 'closed');
  assert.ok(Date.now() - started >= 190, 'waited for the grace period');
  assert.ok('error' in (await stuck), 'the stuck request was cut');
});

test('a port in use: one message naming the port, code EADDRINUSE', async () => {
  const first = await listen(new Koa(), { port: 0 });
  try {
    await listen(new Koa(), { port: first.port });
    assert.unreachable('listened twice on one port');
  } catch (e) {
    assert.is((e as NodeJS.ErrnoException).code, 'EADDRINUSE');
    assert.is((e as Error).message, `port ${first.port} on 127.0.0.1 is already in use`);
  } finally {
    await first.close();
  }
});

test.run();
