#!/usr/bin/env node
// The device ledger over a long history (PROTOCOL.md §12): one grant at one charger, 5,000 offline
// payments six minutes apart (about three weeks of simulated time, a fresh bundle daily). Prints the
// median time and the bytes written per payment for payments 1–100 and 4,901–5,000, and their
// ratios (flat ≈ 1). Only device.verify is timed, not the making of the SBAs.
// Run: node scripts/compile.mjs && node bench/ledger.mjs
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
if (!existsSync(root + 'build/firmware-bridge/device.js')) {
  console.error('build/ is missing: run `node scripts/compile.mjs` first');
  process.exit(1);
}
const CTL = await import(root + 'build/src/index.js');
const { createDevice } = await import(root + 'build/firmware-bridge/device.js');
const { createMemoryByteStorage } = await import(root + 'build/firmware-bridge/abi.js');
const { createNodeAbi } = await import(root + 'build/firmware-bridge/node/test-abi.js');
const { makeFleet, T0, HOUR } = await import(root + 'build/test/offline/fleet.js');

const PAYMENTS = Number(process.env.BENCH_PAYMENTS ?? 5000);
const EVERY = 6 * 60_000;

/** Runs `n` payments on a fresh device and flash; per payment: ms in verify, bytes written. */
async function run(n) {
  const fleet = await makeFleet(CTL, {
    offline: { maxPayments: 1_000_000, maxAmountMinor: '100000000' },
    maxAmountMinor: '100000000',
    bundleTtlMs: 48 * HOUR,
  });
  const inner = createMemoryByteStorage();
  let written = 0;
  const flash = {
    get: (k) => inner.get(k),
    put: (k, v) => {
      written += v.length;
      inner.put(k, v);
    },
    compareAndSet: (k, e, v) => {
      const ok = inner.compareAndSet(k, e, v);
      if (ok) written += v.length;
      return ok;
    },
  };
  const abi = createNodeAbi({ now: T0, storage: flash });
  const device = createDevice(CTL, abi);
  device.provisionRoot({ rootPublicKeyPem: fleet.root.publicKeyPem });
  const ms = [];
  const bytes = [];
  let sequence = 0;
  for (let i = 0; i < n; i++) {
    const at = T0 + i * EVERY;
    abi.setNow(at);
    if (i % 240 === 0) await device.installBundle({ bundle: await fleet.bundle(++sequence, { issuedAt: at - HOUR }) });
    const sba = await fleet.sba('100', at);
    const before = written;
    const t0 = performance.now();
    const r = await device.verify({ sba, amount: '100', currency: 'EUR' });
    ms.push(performance.now() - t0);
    bytes.push(written - before);
    if (!r.valid) {
      console.log(`payment ${i + 1} refused: ${r.error.code} (${r.error.message})`);
      process.exit(1);
    }
  }
  return { ms, bytes };
}

await run(300); // warm-up on another device, so payments 1-100 below are not the JIT's
const { ms, bytes } = await run(PAYMENTS);
const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const early = { ms: median(ms.slice(0, 100)), bytes: median(bytes.slice(0, 100)) };
const late = { ms: median(ms.slice(-100)), bytes: median(bytes.slice(-100)) };
console.log(`device ledger, ${PAYMENTS} payments on one grant, one every 6 min (median per payment)`);
console.log(`  payments 1-100:           ${early.ms.toFixed(3)} ms, ${early.bytes} bytes written`);
console.log(`  payments ${PAYMENTS - 99}-${PAYMENTS}:     ${late.ms.toFixed(3)} ms, ${late.bytes} bytes written`);
console.log(
  `  ratio late ÷ early: time ${(late.ms / early.ms).toFixed(2)}, bytes ${(late.bytes / early.bytes).toFixed(2)} ` +
    '(flat ≈ 1)',
);
