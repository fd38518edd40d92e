/** The revocation cache's rules (authority/store/revocation-cache.ts), without a database. */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createRevocationCache, type CachedStatus } from '../../authority/store/revocation-cache.js';

const NOT = { revoked: false } as const;
const REV = { revoked: true, revokedAt: '2026-06-01T00:00:00.000Z' } as const;

/** A load the test resolves by hand, to interleave invalidations with a read in flight. */
function deferred() {
  let resolve!: (v: CachedStatus) => void;
  const promise = new Promise<CachedStatus>((r) => (resolve = r));
  return { load: () => promise, resolve };
}

test('live: "not revoked" and "unknown" are cached until that grant is invalidated', async () => {
  const c = createRevocationCache({ maxEntries: 10, live: true });
  let loads = 0;
  const load = (v: CachedStatus) => async () => (loads++, v);
  assert.equal(await c.read('g', load(NOT)), NOT);
  assert.equal(await c.read('g', load(REV)), NOT);
  assert.is(await c.read('u', load(null)), null);
  assert.is(c.get('u'), null);
  assert.is(loads, 2);
  c.invalidate('other');
  assert.equal(c.get('g'), NOT);
  c.invalidate('g');
  assert.is(c.get('g'), undefined);
  assert.equal(await c.read('g', load(REV)), REV);
});

test('"revoked" stays through invalidation; everything goes when liveness changes', async () => {
  const c = createRevocationCache({ maxEntries: 10, live: true });
  await c.read('r', async () => REV);
  await c.read('n', async () => NOT);
  c.invalidate('r');
  assert.equal(c.get('r'), REV);
  c.setLive(false);
  assert.is(c.size, 0);
});

test('not live: only "revoked" is cached', async () => {
  const c = createRevocationCache({ maxEntries: 10, live: false });
  await c.read('n', async () => NOT);
  await c.read('u', async () => null);
  await c.read('r', async () => REV);
  assert.is(c.get('n'), undefined);
  assert.is(c.get('u'), undefined);
  assert.equal(c.get('r'), REV);
});

test('a read that began before an invalidation does not fill the cache', async () => {
  const c = createRevocationCache({ maxEntries: 10, live: true });
  const d = deferred();
  const reading = c.read('g', d.load);
  c.invalidate('g'); // the revocation committed while the read was in flight
  d.resolve(NOT); // the read saw the row before it
  assert.equal(await reading, NOT);
  assert.is(c.get('g'), undefined);

  // Same for an invalidation of another grant (one generation for all), and for a reconnection.
  const d2 = deferred();
  const r2 = c.read('h', d2.load);
  c.setLive(false);
  c.setLive(true);
  d2.resolve(NOT);
  await r2;
  assert.is(c.get('h'), undefined);
});

test('bounded: the oldest entry goes first; size 0 caches nothing', async () => {
  const c = createRevocationCache({ maxEntries: 3, live: true });
  for (const id of ['a', 'b', 'c', 'd']) await c.read(id, async () => NOT);
  assert.is(c.size, 3);
  assert.is(c.get('a'), undefined);
  assert.equal(c.get('d'), NOT);
  const off = createRevocationCache({ maxEntries: 0, live: true });
  await off.read('a', async () => REV);
  assert.is(off.size, 0);
});

test('cached answers are frozen copies', async () => {
  const c = createRevocationCache({ maxEntries: 3, live: true });
  const mine = { revoked: false };
  await c.read('g', async () => mine);
  mine.revoked = true;
  const hit = c.get('g')!;
  assert.equal(hit, NOT);
  assert.ok(Object.isFrozen(hit));
});

test('echo: waits for its token, not when not live; a timeout clears the cache', async () => {
  const c = createRevocationCache({ maxEntries: 10, live: true });
  const e = c.expectEcho('t1');
  let done = false;
  const w = e.wait(5000).then(() => (done = true));
  await new Promise((r) => setTimeout(r, 10));
  assert.is(done, false);
  c.echo('other');
  await new Promise((r) => setTimeout(r, 10));
  assert.is(done, false);
  c.echo('t1');
  await w;

  // Arrived before `wait` (the notification can beat the commit's reply).
  const early = c.expectEcho('t2');
  c.echo('t2');
  await early.wait(5000);

  await c.read('g', async () => NOT);
  const lost = c.expectEcho('t3');
  const started = Date.now();
  await lost.wait(30);
  assert.ok(Date.now() - started >= 25);
  assert.is(c.size, 0, 'a missing echo: nothing negative is trusted any more');

  // The listener going down releases waiters at once.
  const down = c.expectEcho('t4');
  const dw = down.wait(5000);
  c.setLive(false);
  await dw;
  const notLive = c.expectEcho('t5');
  await notLive.wait(5000);
});

test.run();
