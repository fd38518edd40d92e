#!/usr/bin/env node
// The bridge's frame reader: time per byte for a 4 KiB and a 256 KiB frame, each fed 1 to 8 bytes
// at a time as a UART delivers it. A linear reader gives a ratio ≈ 1; the old one copied everything
// buffered on each chunk, so its time per byte grew with the frame (measured ratio ≈ 25 here).
// Run: node scripts/compile.mjs && node bench/frame-reader.mjs
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const built = root + 'build/firmware-bridge/protocol.js';
if (!existsSync(built)) {
  console.error('build/ is missing: run `node scripts/compile.mjs` first');
  process.exit(1);
}
const { createFrameReader, frame } = await import(built);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);

/** Nanoseconds per byte to read `stream` in chunks of 1..8 bytes (a fixed cycle). */
function nsPerByte(stream) {
  const reader = createFrameReader();
  const t0 = process.hrtime.bigint();
  let frames = 0;
  for (let at = 0, k = 0; at < stream.length; k++) {
    const n = 1 + (k % 8);
    frames += reader.push(stream.subarray(at, at + n)).length;
    at += n;
  }
  const ns = Number(process.hrtime.bigint() - t0);
  if (frames !== 1) throw new Error(`expected one frame, got ${frames}`);
  return ns / stream.length;
}

const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const small = frame(new Uint8Array(4 * 1024).fill(7));
const large = frame(new Uint8Array(256 * 1024).fill(7));
// The small frame is read 64 times per round, so both sides cover the same 256 KiB of stream.
const smallRuns = [];
const largeRuns = [];
for (let i = 0; i < 3; i++) {
  nsPerByte(small);
  nsPerByte(large);
} // warm-up
for (let r = 0; r < ROUNDS; r++) {
  const s = [];
  for (let i = 0; i < 64; i++) s.push(nsPerByte(small));
  smallRuns.push(median(s));
  largeRuns.push(nsPerByte(large));
}
const a = median(smallRuns);
const b = median(largeRuns);
console.log(`frame reader, chunks of 1-8 bytes (median of ${ROUNDS} rounds)`);
console.log(`  4 KiB frame:   ${a.toFixed(1)} ns/byte`);
console.log(`  256 KiB frame: ${b.toFixed(1)} ns/byte`);
console.log(`  ratio 256 KiB ÷ 4 KiB: ${(b / a).toFixed(2)} (linear ≈ 1)`);
