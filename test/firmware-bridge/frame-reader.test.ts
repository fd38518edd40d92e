/**
 * The frame reader's work is linear in the bytes it is given: a UART hands the bridge a 256 KiB
 * bundle frame a few bytes at a time, and copying everything buffered on each chunk would be
 * quadratic. Asserted deterministically: every byte the reader allocates or copies is counted
 * (it builds its buffers with the global `Uint8Array`, swapped here for a counting subclass), and
 * the count must stay within a small multiple of the frame's size. The time per byte is measured
 * in bench/frame-reader.mjs.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createFrameReader, frame, MAX_FRAME_BYTES } from '../../firmware-bridge/protocol.js';

const Plain = Uint8Array;

/** Runs `fn` with the global Uint8Array counting allocated and copied bytes; throws past `limit`. */
function counting<T>(limit: number, fn: () => T): { result: T; bytes: number } {
  let bytes = 0;
  const add = (n: number) => {
    bytes += n;
    if (bytes > limit) throw new Error(`the reader allocated or copied over ${limit} bytes`);
  };
  class Counting extends Plain {
    constructor(...args: any[]) {
      super(...(args as []));
      if (!(args[0] instanceof ArrayBuffer)) add(this.length); // a view over a buffer is not an allocation
    }
    override set(src: ArrayLike<number>, offset?: number) {
      add(src.length);
      super.set(src, offset);
    }
  }
  (globalThis as any).Uint8Array = Counting;
  try {
    return { result: fn(), bytes };
  } finally {
    (globalThis as any).Uint8Array = Plain;
  }
}

function patterned(n: number): Uint8Array {
  const p = new Plain(n);
  for (let i = 0; i < n; i++) p[i] = (i * 31 + 7) & 0xff;
  return p;
}

test('a maximum-size frame fed one byte at a time: one payload, work linear in its size', () => {
  const payload = patterned(MAX_FRAME_BYTES);
  const stream = frame(payload);
  const reader = createFrameReader();
  const limit = 6 * stream.length;
  const { result: got, bytes } = counting(limit, () => {
    const out: Array<Uint8Array | { oversized: number }> = [];
    for (let i = 0; i < stream.length; i++) {
      out.push(...reader.push(stream.subarray(i, i + 1)));
      if (i === stream.length - 2) assert.is(reader.pending(), stream.length - 1);
    }
    return out;
  });
  assert.is(got.length, 1);
  assert.ok(got[0] instanceof Plain);
  const p = got[0] as Uint8Array;
  assert.is(p.length, payload.length);
  let same = true;
  for (let i = 0; i < p.length; i++)
    if (p[i] !== payload[i]) {
      same = false;
      break;
    }
  assert.ok(same, 'the payload arrives intact');
  assert.ok(bytes <= limit, `${bytes} bytes of work for a ${stream.length}-byte frame`);
  assert.is(reader.pending(), 0);
});

test('frames in chunks of 1 to 8 bytes, back to back with an oversized one between: all in order', () => {
  const payloads = [patterned(3000), patterned(0), patterned(70_000), patterned(1)];
  const big = frame(new Plain(140_000)); // over both limits below: skipped by length
  const stream = new Plain([
    ...frame(payloads[0]!),
    ...big,
    ...frame(payloads[1]!),
    ...frame(payloads[2]!),
    ...frame(payloads[3]!),
  ]);
  const reader = createFrameReader(65_536 * 2);
  const small = createFrameReader(32);
  const got: unknown[] = [];
  const gotSmall: unknown[] = [];
  for (let at = 0, k = 0; at < stream.length; k++) {
    const n = 1 + (k % 8);
    got.push(...reader.push(stream.subarray(at, at + n)));
    gotSmall.push(...small.push(stream.subarray(at, at + n)));
    at += n;
  }
  assert.equal(got, [payloads[0], { oversized: 140_000 }, payloads[1], payloads[2], payloads[3]]);
  assert.equal(
    gotSmall.map((x) => (x instanceof Plain ? x.length : x)),
    [{ oversized: 3000 }, { oversized: 140_000 }, 0, { oversized: 70_000 }, 1],
  );
});

test("the payload handed out is the reader's own copy: the caller may reuse its chunk buffer", () => {
  const stream = frame(patterned(10));
  const chunk = stream.slice();
  const reader = createFrameReader();
  const [p] = reader.push(chunk) as Uint8Array[];
  chunk.fill(0);
  assert.equal([...p!], [...patterned(10)]);
});

test.run();
