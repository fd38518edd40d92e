// What the SDK benches share: the built SDK, ops per second over a fixed window, and medians of
// rounds interleaved so that the machine's drift hits baseline and subject alike.
//   BENCH_MS (per round, default 700), BENCH_ROUNDS (default 5)
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const root = fileURLToPath(new URL('../..', import.meta.url));
export const DURATION_MS = Number(process.env.BENCH_MS ?? 700);
export const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);

/** dist/index.js, or exit with the command that builds it. */
export async function loadDist() {
  if (!existsSync(root + 'dist/index.js')) {
    console.error('dist/ is missing: run `npm run build` first');
    process.exit(1);
  }
  return import(root + 'dist/index.js');
}

/** ops/s of `fn` (sync or async) over DURATION_MS. */
export async function opsPerSec(fn) {
  let n = 0;
  const start = performance.now();
  let now = start;
  while (now - start < DURATION_MS) {
    for (let i = 0; i < 20; i++) await fn();
    n += 20;
    now = performance.now();
  }
  return (n * 1000) / (now - start);
}

export const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Interleaves baseline and subject rounds; prints and returns the medians and subject ÷ baseline. */
export async function compare(label, baseline, subject, width = 52) {
  const b = [],
    s = [];
  for (let r = 0; r < ROUNDS; r++) {
    b.push(await opsPerSec(baseline));
    s.push(await opsPerSec(subject));
  }
  const row = { label, baseline: Math.round(median(b)), subject: Math.round(median(s)), ratio: median(s) / median(b) };
  console.log(
    `${label.padEnd(width)} ${String(row.subject).padStart(7)}/s vs ${String(row.baseline).padStart(7)}/s ` +
      ` ratio ${row.ratio.toFixed(2)}`,
  );
  return row;
}

/**
 * A SpendStorage that records nothing. Offline, verifyCtl records every budgetId it accepts
 * (PROTOCOL.md §12), so one SBA verifies once; a bench that presents one SBA many times to time the
 * verification itself passes this ledger. Never in a terminal: it would accept a replay.
 */
export const ledgerThatForgets = { reserve: () => 'reserved', commit() {}, release() {}, total: () => 0n };
