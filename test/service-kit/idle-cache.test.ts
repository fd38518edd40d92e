/** service-kit/idle-cache.ts: what a service keeps per session follows the sessions in use. */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { idleCache } from '../../service-kit/idle-cache.js';

test('an entry unused for idleMs is gone; one in use stays', () => {
  let t = 1000;
  const c = idleCache<string, number>({ idleMs: 100, now: () => t });
  c.set('a', 1);
  c.set('b', 2);
  t += 60;
  assert.is(c.get('a'), 1); // used: its idle time starts again
  t += 60; // b idle 120 ms, a idle 60 ms
  assert.is(c.get('b'), undefined);
  assert.is(c.get('a'), 1);
});

test('stale entries are swept when a new one is added, so the size follows the sessions in use', () => {
  let t = 1000; // lru-cache takes a start time of 0 for "no start": clocks here never read 0
  const c = idleCache<number, string>({ idleMs: 100, now: () => t });
  for (let i = 0; i < 50; i++) c.set(i, 'x');
  assert.is(c.size, 50);
  t += 150; // all 50 idle past the bound, never read again
  c.set(1000, 'new');
  assert.is(c.size, 1);
});

test('past max the least recently used goes, not everything', () => {
  const c = idleCache<number, number>({ max: 3 });
  c.set(1, 1);
  c.set(2, 2);
  c.set(3, 3);
  c.get(1);
  c.set(4, 4); // 2 is the least recently used
  assert.is(c.get(2), undefined);
  assert.equal([c.get(1), c.get(3), c.get(4)], [1, 3, 4]);
  assert.is(c.size, 3);
});

test.run();
