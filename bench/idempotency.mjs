#!/usr/bin/env node
// What an Idempotency-Key costs a paid request (gateway/README.md "Idempotency-Key"): paid
// requests through /proxy without a key, with a fresh key each (claim + stored answer), and the
// replay of a key already answered, at 1 and 50 connections, on SQLite and PostgreSQL. Ratios
// are against the unkeyed paid request measured in the same run. The gateway and the merchant run
// in their own processes; this one generates the load (closed loop, keep-alive).
//
//   node scripts/compile.mjs && node bench/idempotency.mjs     BENCH_SECONDS=2 per measurement, BENCH_ROUNDS=3
//   BENCH_PG_URL=postgres://postgres@127.0.0.1:5432/test (unreachable → SKIPPED line)
import { randomBytes } from 'node:crypto';
import {
  startMerchant,
  startGateway,
  stop,
  request,
  closedLoop,
  createOwner,
  createSession,
  benchStores,
} from './lib/gateway-procs.mjs';

const measure = (conns, seconds, send) => closedLoop(conns, seconds, send, 500);
const post = (agent, url, headers) => request(agent, url, headers, 'POST');

/** The median of several measurements, by req/s (its p50 with it). */
function median(rs) {
  const sorted = [...rs].sort((a, b) => a.rps - b.rps);
  return { ...sorted[Math.floor(sorted.length / 2)], bad: rs.reduce((n, r) => n + r.bad, 0) };
}

async function runBench() {
  const seconds = Number(process.env.BENCH_SECONDS ?? 2);
  const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
  const pgUrl = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  const merchant = await startMerchant();
  const shop = `http://127.0.0.1:${merchant.info.port}/search`;
  const { stores, cleanup } = await benchStores(pgUrl, 'ctl-bench-idem-');
  console.log(`Idempotency-Key bench: ${seconds} s per measurement, Node ${process.version}`);
  console.log('store       conns  kind                       req/s    p50 ms   vs unkeyed paid (req/s, +p50)');
  try {
    for (const store of stores) {
      const gw = await startGateway(store.env);
      try {
        const owner = await createOwner(gw.info.url);
        const session = await createSession(gw.info.url, owner);
        const base = {
          authorization: `Bearer ${session.sessionToken}`,
          'x-target-url': shop,
          'x-target-method': 'GET',
          'x-ctl-purpose': 'api:search',
        };
        const url = `${gw.info.url}/proxy`;
        for (const conns of [1, 50]) {
          const replayKey = `replay-${conns}`;
          await post(undefined, url, { ...base, 'idempotency-key': replayKey });
          // The three kinds interleaved over BENCH_ROUNDS rounds, median of each: a shared machine's
          // drift hits them alike.
          const runs = { plain: [], fresh: [], replay: [] };
          for (let round = 0; round < rounds; round++) {
            runs.plain.push(await measure(conns, seconds, (a) => post(a, url, base)));
            runs.fresh.push(
              await measure(conns, seconds, (a) =>
                post(a, url, { ...base, 'idempotency-key': randomBytes(16).toString('base64url') }),
              ),
            );
            runs.replay.push(
              await measure(conns, seconds, (a) => post(a, url, { ...base, 'idempotency-key': replayKey })),
            );
          }
          const [plain, fresh, replay] = [runs.plain, runs.fresh, runs.replay].map(median);
          for (const [kind, r] of [
            ['paid, no key', plain],
            ['paid, fresh key each', fresh],
            ['replay of an answered key', replay],
          ]) {
            const ratio = (r.rps / plain.rps).toFixed(2);
            const added = (r.p50 - plain.p50).toFixed(2);
            const sign = added.startsWith('-') ? '' : '+';
            const bad = r.bad ? `  (${r.bad} not 200)` : '';
            console.log(
              `${store.name.padEnd(11)} ${String(conns).padStart(5)}  ${kind.padEnd(26)} ` +
                `${r.rps.toFixed(0).padStart(6)}  ${r.p50.toFixed(2).padStart(7)}   ` +
                `${ratio}×, ${sign}${added} ms${bad}`,
            );
          }
        }
      } finally {
        await stop(gw.child);
      }
    }
  } finally {
    await stop(merchant.child);
    await cleanup();
  }
}

await runBench();
