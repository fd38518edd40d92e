/**
 * The tunnel watch on its own (egress/tunnel-watch.ts), with a stand-in for the database read:
 * an ancestor's end closes a descendant's tunnel, an end told before the tunnel was added refuses
 * it, the re-check closes what ended elsewhere, and an expiry beyond setTimeout's range waits.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { EventEmitter } from 'node:events';
import { createTunnelWatch, type Ending, type SessionEnds } from '../../../gateway/egress/tunnel-watch.js';

function fakeEnds(stoppedIds: Set<string>) {
  const listeners = new Set<(id: string, how: Ending) => void>();
  const asked: string[][] = [];
  const ends: SessionEnds = {
    ended: (id, how) => listeners.forEach((fn) => fn(id, how)),
    onEnded: (fn) => (listeners.add(fn), () => listeners.delete(fn)),
    async stopped(ids) {
      asked.push([...ids]);
      return new Set(ids.filter((id) => stoppedIds.has(id)));
    },
  };
  return { ends, asked };
}

function tunnel() {
  const e = new EventEmitter() as EventEmitter & { destroyed: boolean; destroy(): void };
  e.destroyed = false;
  e.destroy = () => {
    if (e.destroyed) return;
    e.destroyed = true;
    e.emit('close');
  };
  return e;
}

const HOUR = 3600_000;

test("an ancestor's end closes a descendant's tunnel; an end told first refuses the tunnel", () => {
  const { ends } = fakeEnds(new Set());
  const watch = createTunnelWatch({ ends, now: Date.now, recheckMs: 60_000 });
  const child = tunnel();
  const other = tunnel();
  assert.is(watch.add({ id: 'c', path: '/p/c/', expiresAt: Date.now() + HOUR }, child), undefined);
  assert.is(watch.add({ id: 'x', path: '/x/', expiresAt: Date.now() + HOUR }, other), undefined);
  ends.ended('p', 'revoked');
  assert.ok(child.destroyed);
  assert.not.ok(other.destroyed);
  assert.is(watch.size, 1);
  assert.is(watch.add({ id: 'c', path: '/p/c/', expiresAt: Date.now() + HOUR }, tunnel()), 'revoked');
  assert.is(watch.size, 1);
  watch.close();
});

test('the re-check closes a tunnel whose session (or ancestor) ended elsewhere', async () => {
  const stopped = new Set<string>();
  const { ends, asked } = fakeEnds(stopped);
  const watch = createTunnelWatch({ ends, now: Date.now, recheckMs: 20 });
  const t = tunnel();
  watch.add({ id: 'c', path: '/p/c/', expiresAt: Date.now() + HOUR }, t);
  await new Promise((r) => setTimeout(r, 60));
  assert.not.ok(t.destroyed);
  assert.equal(asked.at(-1)!.sort(), ['c', 'p'], 'the session and its ancestors are read');
  stopped.add('p');
  await new Promise((r) => setTimeout(r, 60));
  assert.ok(t.destroyed);
  assert.is(watch.size, 0);
  watch.close();
});

test('an expiry past setTimeout’s range neither fires at once nor closes anything', async () => {
  const { ends, asked } = fakeEnds(new Set());
  const watch = createTunnelWatch({ ends, now: Date.now, recheckMs: 60_000 });
  const t = tunnel();
  watch.add({ id: 's', path: '/s/', expiresAt: Date.now() + 30 * 24 * HOUR }, t);
  await new Promise((r) => setTimeout(r, 30));
  assert.equal(asked, [], 'no check before the expiry');
  assert.not.ok(t.destroyed);
  watch.close();
});

test.run();
