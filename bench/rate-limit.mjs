#!/usr/bin/env node
// What counting rate limits costs a request: two gateway processes on one database, one with no
// limits and one whose limits count every request but never refuse (1e9 per 60 s), measured in
// alternating rounds in the same run; printed as ratios (limited ÷ unlimited). Two routes: an
// unpaid /proxy request (the per-session limit; the smallest request, so the largest share) and
// an owner read GET /sessions/{id} (the per-owner limit). On SQLite counters are in memory; on
// PostgreSQL each request is one more upsert on the gateway's pool.
//
//   npm run compile && node bench/rate-limit.mjs     BENCH_SECONDS=3 BENCH_ROUNDS=2 BENCH_CONNS=1,16
//   BENCH_PG_URL=postgres://postgres@127.0.0.1:5432/test (unreachable → SKIPPED line)
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

async function runBench() {
  const seconds = Number(process.env.BENCH_SECONDS ?? 3);
  const rounds = Number(process.env.BENCH_ROUNDS ?? 2);
  const connsList = (process.env.BENCH_CONNS ?? '1,16').split(',').map(Number);
  const pgUrl = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  const merchant = await startMerchant();
  const shop = `http://127.0.0.1:${merchant.info.port}`;
  const { stores, cleanup } = await benchStores(pgUrl, 'ctl-bench-rl-');
  const off = { CTL_GATEWAY_RATE_LIMIT_OWNER: '0', CTL_GATEWAY_RATE_LIMIT_SESSION: '0' };
  const on = { CTL_GATEWAY_RATE_LIMIT_OWNER: '1000000000/60s', CTL_GATEWAY_RATE_LIMIT_SESSION: '1000000000/60s' };
  console.log(
    `rate-limit bench: ${rounds} alternating rounds of ${seconds} s per measurement, Node ${process.version}`,
  );
  console.log('store       route                 conns   unlimited req/s  limited req/s   ratio   +p50 ms');
  try {
    for (const store of stores) {
      // SQLite: one writer per file, so the two processes take turns on the same file; only
      // the measured one is under load.
      const a = await startGateway({ ...store.env, ...off });
      const b = await startGateway({ ...store.env, ...on });
      try {
        const owner = await createOwner(a.info.url);
        const session = await createSession(a.info.url, owner, '1000');
        const routes = [
          [
            'POST /proxy (unpaid)',
            (url) => (ag) =>
              request(
                ag,
                `${url}/proxy`,
                {
                  authorization: `Bearer ${session.sessionToken}`,
                  'x-target-url': `${shop}/free`,
                  'x-target-method': 'GET',
                },
                'POST',
              ),
          ],
          [
            'GET /sessions/{id}',
            (url) => (ag) => request(ag, `${url}/sessions/${session.sessionId}`, { authorization: `Bearer ${owner}` }),
          ],
        ];
        for (const [name, send] of routes) {
          for (const conns of connsList) {
            const sum = { off: { n: 0, t: 0, p50: [] }, on: { n: 0, t: 0, p50: [] } };
            for (let r = 0; r < rounds; r++) {
              for (const [k, g] of r % 2
                ? [
                    ['on', b],
                    ['off', a],
                  ]
                : [
                    ['off', a],
                    ['on', b],
                  ]) {
                const m = await closedLoop(conns, seconds, send(g.info.url));
                if (m.bad) throw new Error(`${store.name} ${name} ${k}: ${m.bad} answers were not 200`);
                sum[k].n += m.n;
                sum[k].t += seconds;
                sum[k].p50.push(m.p50);
              }
            }
            const rps = (k) => sum[k].n / sum[k].t;
            const p50 = (k) => sum[k].p50.reduce((x, y) => x + y, 0) / sum[k].p50.length;
            const ratio = (rps('on') / rps('off')).toFixed(2);
            const added = (p50('on') - p50('off')).toFixed(2);
            console.log(
              `${store.name.padEnd(11)} ${name.padEnd(21)} ${String(conns).padStart(5)}   ` +
                `${rps('off').toFixed(0).padStart(15)} ${rps('on').toFixed(0).padStart(14)}   ` +
                `${ratio.padStart(5)}   ${added.padStart(7)}`,
            );
          }
        }
      } finally {
        await stop(a.child);
        await stop(b.child);
      }
    }
  } finally {
    await stop(merchant.child);
    await cleanup();
  }
}

await runBench();
