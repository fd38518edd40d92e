/**
 * Work that runs inline on an idle loop and on libuv's thread pool on a busy one (loop-busy.ts):
 * the sampler itself, and both paths of its two users (off-thread signing, the WAL's fdatasync),
 * driven by an injected `loopBusy` rather than by loading the machine.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, openSync, closeSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loopIsBusy } from '../../service-kit/loop-busy.js';
import { signingOffThread, ed25519KeyObject } from '../../service-kit/signers/index.js';
import { createFdatasync } from '../../service-kit/wal-flush.js';
import { generateKeyPair, importSigningKey } from '../../src/index.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Whether `p` settles within a run of microtasks. Work done inline hands back a settled promise;
 * a pool job's callback runs only once the loop has turned (its poll phase), never in between:
 * an ordering fixed by the event loop, not a measured time.
 */
async function settlesInline(p: Promise<unknown>): Promise<boolean> {
  let settled = false;
  p.then(
    () => (settled = true),
    () => (settled = true),
  );
  for (let i = 0; i < 20; i++) await null;
  return settled;
}

test(
  'loopIsBusy: false on an idle loop, true after the loop was held past the threshold, ' + 'false again once idle',
  async () => {
    assert.is(loopIsBusy(), false, 'the sampler starts idle');
    await sleep(150); // one sample taken: the next window starts after it
    // Hold the loop (Atomics.wait blocks the thread: the loop counts it as active) for 3 periods.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300);
    // The sampler's tick fell due during the hold and runs at the next timers phase; its answer then
    // stands for a period (looked at a few times, so the order of due timers does not matter).
    let busy = loopIsBusy();
    for (let i = 0; i < 5 && !busy; i++) busy = (await sleep(5), loopIsBusy());
    assert.is(busy, true, 'a window of about 300 ms held out of 350');
    await sleep(350); // idle windows follow
    assert.is(loopIsBusy(), false);
  },
);

test(
  'signingOffThread: inline when the loop is idle, on the pool when busy (asked at each ' +
    'signature), the same bytes either way',
  async () => {
    const pair = await generateKeyPair({ alg: 'EdDSA' });
    const onLoop = await importSigningKey(pair.privateKeyPem);
    let busy = false;
    let asked = 0;
    const key = signingOffThread(onLoop, ed25519KeyObject(pair.privateKeyPem), () => (asked++, busy));
    const msg = new TextEncoder().encode('{"a":1}');
    const expected = Array.from(await onLoop.sign(msg));

    const inline = key.sign(msg);
    assert.ok(await settlesInline(inline), 'idle: signed inline');
    busy = true;
    const pooled = key.sign(msg);
    assert.not.ok(await settlesInline(pooled), 'busy: signed on the pool, answered after the loop turned');
    assert.is(asked, 2);
    for (const sig of [await inline, await pooled]) {
      assert.ok(sig instanceof Uint8Array && !Buffer.isBuffer(sig), 'a plain Uint8Array, never a Buffer');
      assert.equal(Array.from(sig), expected);
    }
    // A misuse is a rejection on either path, decided before the loop is asked.
    for (busy of [false, true]) {
      let error: unknown;
      await key.sign('x' as never).catch((e) => (error = e));
      assert.instance(error, TypeError);
    }
    assert.is(asked, 2);
  },
);

test(
  'createFdatasync: inline when the loop is idle, on the pool when busy; a failed flush ' +
    'is a rejection on either path',
  async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ctl-flush-'));
    const fd = openSync(join(dir, 'f'), 'w');
    try {
      writeSync(fd, 'frames');
      let busy = false;
      let asked = 0;
      const flush = createFdatasync(() => (asked++, busy));
      const inline = flush(fd);
      assert.ok(await settlesInline(inline), 'idle: flushed inline');
      await inline;
      busy = true;
      const pooled = flush(fd);
      assert.not.ok(await settlesInline(pooled), 'busy: flushed on the pool, answered after the loop turned');
      await pooled;
      assert.is(asked, 2);
      // A descriptor that is not open: EBADF, from fdatasyncSync's throw or from the pool's callback.
      for (busy of [false, true]) {
        let error: unknown;
        await flush(2 ** 30).catch((e) => (error = e));
        assert.is((error as NodeJS.ErrnoException)?.code, 'EBADF', `busy: ${busy}`);
      }
      assert.is(asked, 4);
    } finally {
      closeSync(fd);
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

test.run();
