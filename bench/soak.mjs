#!/usr/bin/env node
// Soak: paid traffic for minutes through one gateway process on a real database, to see whether
// the gateway's memory stays flat and its latency steady, and that the books hold at the end.
// 50 connections (closed loop, keep-alive) over many sessions: a fresh batch of sessions each
// interval, so session state is created and left behind as in a fleet. Every interval (10 s) it
// prints the gateway's RSS, heap used, event-loop delay (monitorEventLoopDelay, in the gateway)
// and the client-side p50/p99 of that interval. At the end: each session's spent equals the paid
// answers it got and nothing is left reserved; memory of the last third vs the first third
// (after the first interval, warm-up), and what grew.
//
//   npm run compile && npm run soak -- --seconds 180 [--db postgres] [--conns 50] [--interval 10] [--rotate no]
import http from 'node:http';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import {
  startMerchant,
  startGateway,
  stop,
  createOwner,
  createSession,
  sessionView,
  paidRequest,
  pgReachable,
  dropSchema,
} from './lib/gateway-procs.mjs';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const seconds = Number(arg('seconds', 600));
const conns = Number(arg('conns', 50));
const intervalS = Number(arg('interval', 10));
const sessionsPerInterval = Number(arg('sessions', 50));
// --rotate no: the first batch of sessions only, all run long: what grows then is not per-session state.
const rotate = arg('rotate', 'yes') !== 'no';
const dbKind = arg('db', 'sqlite');
const pgUrl = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
// Flat = the last third's mean within this fraction of the first third's (after warm-up).
const FLAT = 0.1; // of the floors below

const dir = mkdtempSync(join(tmpdir(), 'ctl-soak-'));
let env, schema;
if (dbKind === 'postgres') {
  if (!(await pgReachable(pgUrl))) throw new Error(`${pgUrl} is unreachable`);
  schema = `ctl_soak_${randomBytes(4).toString('hex')}`;
  env = { BENCH_DB: pgUrl, BENCH_SCHEMA: schema };
} else env = { BENCH_DB: `sqlite:${join(dir, 'gateway.db')}` };
env.BENCH_STATS_MS = String(intervalS * 1000);

const merchant = await startMerchant();
const shop = `http://127.0.0.1:${merchant.info.port}`;
// BENCH_NODE_ARGS (e.g. --cpu-prof) goes to the gateway process only: a profile of paid traffic alone.
const gw = await startGateway(env, process.env.BENCH_NODE_ARGS ? process.env.BENCH_NODE_ARGS.split(' ') : []);
const url = gw.info.url;
let latestStats;
gw.child.stdout.on('data', (d) => {
  for (const line of String(d).split('\n')) if (line.startsWith('{"stats"')) latestStats = JSON.parse(line).stats;
});

const owner = await createOwner(url, 'soak');
const sessions = []; // { id, token, paid }
async function newBatch() {
  const batch = [];
  for (let i = 0; i < sessionsPerInterval; i++) {
    const s = await createSession(url, owner);
    batch.push({ id: s.sessionId, token: s.sessionToken, paid: 0 });
  }
  sessions.push(...batch);
  return batch;
}
let current = await newBatch();

const sessionPlan = rotate
  ? `${sessionsPerInterval} new sessions every ${intervalS} s`
  : `the same ${sessionsPerInterval} sessions throughout`;
console.log(
  `soak: ${seconds} s, ${conns} connections of paid traffic, ${sessionPlan}, ` +
    `${dbKind === 'postgres' ? 'PostgreSQL' : 'SQLite'}, Node ${process.version}`,
);
console.log('  t s   paid/s   p50 ms   p99 ms   rss MB  heap MB  ext MB   eld p50  eld p99  eld max ms  non-200');
const agent = new http.Agent({ keepAlive: true, maxSockets: conns });
const samples = [];
let lat = [];
let bad = 0;
let rr = 0;
const end = performance.now() + seconds * 1000;
const started = performance.now();
let stopping = false;

const workers = Array.from({ length: conns }, async () => {
  while (!stopping && performance.now() < end) {
    const s = current[rr++ % current.length];
    const t = performance.now();
    const status = await paidRequest(agent, url, s.token, shop).catch(() => 0);
    lat.push(performance.now() - t);
    if (status === 200) s.paid++;
    else bad++;
  }
});

const mb = (b) => (b / 2 ** 20).toFixed(1);
const sampler = (async () => {
  let last = performance.now();
  while (performance.now() < end - 100) {
    await new Promise((r) => setTimeout(r, Math.min(intervalS * 1000, end - performance.now())));
    const now = performance.now();
    const window = lat;
    const windowBad = bad;
    lat = [];
    bad = 0;
    window.sort((a, b) => a - b);
    const q = (p) => window[Math.min(window.length - 1, Math.floor(p * window.length))] ?? NaN;
    // The gateway reports on its own timer; give it a moment to land after ours.
    await new Promise((r) => setTimeout(r, 50));
    const g = latestStats ?? {};
    const row = {
      t: (now - started) / 1000,
      rps: window.length / ((now - last) / 1000),
      p50: q(0.5),
      p99: q(0.99),
      ...g,
      bad: windowBad,
    };
    samples.push(row);
    console.log(
      `${row.t.toFixed(0).padStart(5)} ${row.rps.toFixed(0).padStart(8)} ` +
        `${row.p50.toFixed(2).padStart(8)} ${row.p99.toFixed(2).padStart(8)} ` +
        `${mb(g.rss ?? 0).padStart(8)} ${mb(g.heapUsed ?? 0).padStart(8)} ${mb(g.external ?? 0).padStart(7)} ` +
        `${(g.eldP50 ?? 0).toFixed(1).padStart(9)} ${(g.eldP99 ?? 0).toFixed(1).padStart(8)} ` +
        `${(g.eldMax ?? 0).toFixed(1).padStart(11)} ${String(windowBad).padStart(8)}`,
    );
    last = now;
    if (rotate && performance.now() < end - 1000) current = await newBatch();
  }
})();

let ok = true;
try {
  await Promise.all([...workers, sampler]);
  stopping = true;
  agent.destroy();

  // Books: per session, spent = paid answers (1 minor unit each) and nothing reserved.
  let paid = 0;
  let spent = 0n;
  let reserved = 0n;
  const mismatched = [];
  for (const s of sessions) {
    const v = await sessionView(url, owner, s.id);
    paid += s.paid;
    spent += BigInt(v.spentMinor);
    reserved += BigInt(v.reservedMinor);
    if (v.spentMinor !== String(s.paid) || v.reservedMinor !== '0')
      mismatched.push(`${s.id}: paid ${s.paid}, spent ${v.spentMinor}, reserved ${v.reservedMinor}`);
  }
  const booksOk = mismatched.length === 0;
  ok &&= booksOk;
  const books = booksOk
    ? 'the books match'
    : `MISMATCH in ${mismatched.length} sessions\n  ${mismatched.slice(0, 10).join('\n  ')}`;
  console.log(
    `books: ${sessions.length} sessions, ${paid} paid answers, spent ${spent} minor units, ` +
      `reserved ${reserved}: ${books}`,
  );
  // SQLite: what the database file (and its WAL) hold per paid answer, sessions and all.
  if (dbKind !== 'postgres') {
    const size = (f) => (existsSync(f) ? statSync(f).size : 0);
    const db = size(join(dir, 'gateway.db'));
    const wal = size(join(dir, 'gateway.db-wal'));
    console.log(
      `storage: database ${(db / 1e6).toFixed(1)} MB (${(db / Math.max(1, paid) / 1e3).toFixed(2)} ` +
        `KB per paid answer), WAL ${(wal / 1e6).toFixed(1)} MB`,
    );
  }

  // Memory: first interval is warm-up; compare the means of the first and last thirds of the rest.
  const steady = samples.slice(1).filter((s) => s.rss);
  if (steady.length < 3)
    console.log(`memory: too few samples (${steady.length}) to judge; run longer than ${intervalS * 4} s`);
  else {
    const third = Math.floor(steady.length / 3);
    const mean = (rows, k) => rows.reduce((a, r) => a + r[k], 0) / rows.length;
    // The heap saws up and down between major GCs: judge by each third's floor (its lowest
    // sample, nearest to live data), and print the means beside it.
    const floor = (rows, k) => Math.min(...rows.map((r) => r[k]));
    const grew = [];
    const parts = [];
    for (const k of ['rss', 'heapUsed', 'heapTotal', 'external', 'arrayBuffers']) {
      const a = floor(steady.slice(0, third), k);
      const b = floor(steady.slice(-third), k);
      const change = (b - a) / a;
      parts.push(
        `${k} floor ${mb(a)} → ${mb(b)} MB (${change >= 0 ? '+' : ''}${(change * 100).toFixed(1)}%), ` +
          `mean ${mb(mean(steady.slice(0, third), k))} → ${mb(mean(steady.slice(-third), k))}`,
      );
      if (change > FLAT && b - a > 2 ** 20) grew.push(k);
    }
    const p99a = mean(steady.slice(0, third), 'p99');
    const p99b = mean(steady.slice(-third), 'p99');
    console.log(`memory (first third vs last third of ${steady.length} samples after warm-up): ${parts.join('; ')}`);
    console.log(`latency: p99 ${p99a.toFixed(2)} → ${p99b.toFixed(2)} ms`);
    console.log(
      grew.length
        ? `memory is NOT flat: grew ${grew.join(', ')} by more than ${FLAT * 100}%`
        : `memory is flat (no measure grew by more than ${FLAT * 100}% or 1 MB)`,
    );
  }
} finally {
  await stop(gw.child);
  await stop(merchant.child);
  rmSync(dir, { recursive: true, force: true });
  if (schema) await dropSchema(pgUrl, schema);
}
process.exit(ok ? 0 : 1);
