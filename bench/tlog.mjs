#!/usr/bin/env node
// The transparency log at scale (service-kit/tlog), on a synthetic SQLite log of BENCH_TLOG_SIZE
// entries (default 1,000,000, each a receipt-sized JSON entry of ~600 bytes):
//   - how fast the sequencer integrates (entries/s, tiles included);
//   - the size of an inclusion proof as /log/proof/inclusion serves it (JSON without the entry
//     and checkpoint texts, and the raw hashes) — target ≤ 1.5 KB at 10⁶;
//   - a full audit from the served data: every entry bundle read and hashed, every tile
//     recomputed level by level and compared with the served one, the root recomputed (RFC 9162
//     recursion, test/helpers/tlog-reference.ts) and compared with the signed checkpoint's.
//
//   npm run compile && node bench/tlog.mjs            BENCH_TLOG_SIZE=1000000
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const build = (p) => new URL(`../build/${p}`, import.meta.url).href;
const { openDatabase, migrate } = await import(build('service-kit/index.js'));
const tlog = await import(build('service-kit/tlog/index.js'));
const { parseEntryBundle } = await import(build('src/entries/log.js'));
const ref = await import(build('test/helpers/tlog-reference.js'));

const SIZE = Number(process.env.BENCH_TLOG_SIZE ?? 1_000_000);
const dir = mkdtempSync(join(tmpdir(), 'ctl-bench-tlog-'));
const db = await openDatabase(`sqlite:${join(dir, 'log.db')}`);
try {
  await migrate(db, tlog.serviceLogMigrations('b_log'));
  const signer = await tlog.generateNoteSigner('bench.example/ctl-bench-log');
  const log = tlog.createTransparencyLog({ db, prefix: 'b_log', signer, batch: 8192 });
  const body = { receiptId: '', sessionId: 'sess_0123456789abcdefghij', pad: 'x'.repeat(520) };

  let t = performance.now();
  let appendMs = 0;
  let sequenceMs = 0;
  for (let from = 0; from < SIZE; from += 50_000) {
    const a = performance.now();
    await db.tx(async (q) => {
      for (let i = from; i < Math.min(SIZE, from + 50_000); i++)
        await log.append(q, { type: 'receipt', body: { ...body, receiptId: `rcpt_${i}` } }, `receipt:rcpt_${i}`);
    });
    const b = performance.now();
    await log.sequence();
    appendMs += b - a;
    sequenceMs += performance.now() - b;
  }
  await log.publish();
  const cp = await log.checkpoint();
  console.log(
    `synthetic log: ${SIZE} entries; appended (pending rows) in ${(appendMs / 1000).toFixed(1)} s, ` +
      `integrated in ${(sequenceMs / 1000).toFixed(1)} s (${((SIZE / sequenceMs) * 1000).toFixed(0)} entries/s)`,
  );

  // Inclusion proofs as the endpoint serves them.
  let worst = { json: 0, raw: 0, n: 0 };
  for (const index of [0, Math.floor(SIZE / 3), SIZE - 1, SIZE - 2]) {
    const p = await log.inclusion(index, cp.size);
    const json = JSON.stringify({
      index,
      size: cp.size,
      leafHash: p.leafHash.toString('base64'),
      hashes: p.hashes.map((h) => h.toString('base64')),
    });
    if (Buffer.byteLength(json) > worst.json)
      worst = { json: Buffer.byteLength(json), raw: p.hashes.length * 32, n: p.hashes.length };
    const root = ref.refOpenCheckpoint(cp.note, signer.vkey).root;
    if (!ref.refVerifyInclusion(index, cp.size, p.leafHash, p.hashes, root)) throw new Error(`proof ${index} fails`);
  }
  console.log(
    `inclusion proof at ${SIZE} entries: ${worst.n} hashes, ${worst.raw} bytes raw, ` +
      `${worst.json} bytes as JSON (without the entry and checkpoint texts; target ≤ 1536)`,
  );

  // A full audit from the served data.
  t = performance.now();
  const leaves = [];
  const full = Math.floor(SIZE / 256);
  for (let n = 0; n * 256 < SIZE; n++) {
    const width = n < full ? 256 : SIZE % 256;
    const bundle = parseEntryBundle(await log.entryBundle(n, width)).map((e) => Buffer.from(e));
    for (const e of bundle) leaves.push(ref.refLeafHash(e));
  }
  const readMs = performance.now() - t;
  let tiles = 0;
  for (const [key, bytes] of ref.refTiles(leaves)) {
    const m = /^(\d+)\/(\d+)(?:\.p\/(\d+))?$/.exec(key);
    const served = await log.tile(Number(m[1]), Number(m[2]), m[3] ? Number(m[3]) : 256);
    if (!served?.equals(bytes)) throw new Error(`tile ${key} differs`);
    tiles++;
  }
  const root = ref.refRoot(leaves);
  if (!root.equals(ref.refOpenCheckpoint(cp.note, signer.vkey).root)) throw new Error('root differs');
  const auditMs = performance.now() - t;
  console.log(
    `full audit of ${SIZE} entries: ${(auditMs / 1000).toFixed(1)} s ` +
      `(bundles read and hashed ${(readMs / 1000).toFixed(1)} s; ` +
      `${tiles} tiles recomputed and compared, root recomputed and equal to the signed checkpoint's)`,
  );
  // Every checkpoint root a monitor would check, from the tiles alone (no entries): 1000 sizes.
  t = performance.now();
  for (let k = 1; k <= 1000; k++) await log.rootAt(Math.floor((SIZE * k) / 1000));
  console.log(`1000 roots of earlier sizes from the tiles alone: ${((performance.now() - t) / 1000).toFixed(2)} s`);
  await log.close();
} finally {
  await db.close();
  rmSync(dir, { recursive: true, force: true });
}
