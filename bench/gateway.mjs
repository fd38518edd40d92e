#!/usr/bin/env node
// Gateway throughput and latency (issue 4 §11): paid requests per second through the gateway
// and p50/p99 latency, each beside a direct unpaid request to the same merchant measured in the
// same run, at 1 and 50 connections, on SQLite and PostgreSQL. The gateway and the merchant run
// in their own processes; this process is the load generator (closed loop, keep-alive).
//
//   npm run compile && node bench/gateway.mjs            BENCH_SECONDS=5 (per measurement)
//   BENCH_PG_URL=postgres://postgres@127.0.0.1:5432/test (unreachable → SKIPPED line)
import { spawn } from 'node:child_process';
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const build = (p) => pathToFileURL(join(root, 'build', p)).href;
const role = process.argv.find((a) => a.startsWith('--role='))?.slice(7);

if (role === 'merchant') {
  // 402 with X-Payment unless paid; /free always 200. Same small JSON body either way.
  const body = JSON.stringify({ results: [1, 2, 3] });
  const server = http.createServer((req, res) => {
    if (req.url === '/free' || req.headers['x-payment-receipt']) {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      return res.end(body);
    }
    res.writeHead(402, { 'x-payment': '{"amount":"1","currency":"USD","address":"bench-merchant"}', 'content-length': 0 });
    res.end();
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ port: server.address().port })));
} else if (role === 'gateway') {
  const { openDatabase, listen, silentLogger } = await import(build('service-kit/index.js'));
  const { createGatewayApp } = await import(build('gateway/app.js'));
  const db = await openDatabase(process.env.BENCH_DB, { schema: process.env.BENCH_SCHEMA || undefined, poolSize: 20 });
  const gw = await createGatewayApp({ db, adminKey: 'bench-admin-key-0123456789', logger: silentLogger(), targets: { allowPrivate: true } });
  const srv = await listen(gw.app, { port: 0 });
  srv.server.keepAliveTimeout = 60_000;
  console.log(JSON.stringify({ url: srv.url }));
  process.on('SIGTERM', async () => {
    await srv.close().catch(() => {});
    await gw.close();
    await db.close();
    process.exit(0);
  });
}

function child(args, env = {}) {
  // BENCH_NODE_ARGS (e.g. --cpu-prof) goes to the gateway process only, for profiling.
  const extra = args.includes('--role=gateway') && process.env.BENCH_NODE_ARGS ? process.env.BENCH_NODE_ARGS.split(' ') : [];
  const c = spawn(process.execPath, [...extra, fileURLToPath(import.meta.url), ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let out = '';
    c.stdout.on('data', (d) => {
      out += d;
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (line) resolve({ child: c, info: JSON.parse(line) });
    });
    c.on('exit', (code) => reject(new Error(`${args.join(' ')} exited ${code}`)));
  });
}
function stop(c) {
  return new Promise((r) => {
    c.once('exit', r);
    c.kill('SIGTERM');
  });
}

function request(agent, url, headers, method = 'GET') {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = http.request({ hostname: u.hostname, port: u.port, path: u.pathname + u.search, method, headers, agent }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Closed loop: `conns` workers, each one request at a time, for `seconds`. */
async function measure(conns, seconds, send) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: conns });
  const warmUntil = performance.now() + 500;
  let warm200 = 0;
  while (performance.now() < warmUntil) warm200 += (await Promise.all(Array.from({ length: conns }, () => send(agent)))).filter((s) => s === 200).length;
  const lat = [];
  let bad = 0;
  const end = performance.now() + seconds * 1000;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: conns }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        const status = await send(agent);
        lat.push(performance.now() - t);
        if (status !== 200) bad++;
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  agent.destroy();
  lat.sort((a, b) => a - b);
  const q = (p) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))];
  return { rps: lat.length / elapsed, p50: q(0.5), p99: q(0.99), n: lat.length, bad, ok200: lat.length - bad + warm200 };
}

async function pgReachable(url) {
  const pg = (await import('pg')).default;
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await c.connect();
    await c.end();
    return true;
  } catch {
    return false;
  }
}

async function runBench() {
  const seconds = Number(process.env.BENCH_SECONDS ?? 5);
  const pgUrl = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  const merchant = await child(['--role=merchant']);
  const shop = `http://127.0.0.1:${merchant.info.port}`;
  const dir = mkdtempSync(join(tmpdir(), 'ctl-bench-'));
  const stores = [{ name: 'SQLite', env: { BENCH_DB: `sqlite:${join(dir, 'gateway.db')}` } }];
  let schema;
  if (await pgReachable(pgUrl)) {
    schema = `ctl_bench_${randomBytes(4).toString('hex')}`;
    stores.push({ name: 'PostgreSQL', env: { BENCH_DB: pgUrl, BENCH_SCHEMA: schema } });
  } else console.log(`SKIPPED PostgreSQL: ${pgUrl} is unreachable`);

  console.log(`gateway bench: ${seconds} s per measurement, Node ${process.version}, merchant and ${process.env.BENCH_INSTANCES ?? 1} gateway process(es) in their own processes`);
  console.log('store       conns  kind                     req/s     p50 ms   p99 ms   vs direct (req/s, +p50)');
  const rows = [];
  try {
    for (const store of stores) {
      const gw = await child(['--role=gateway'], store.env);
      try {
        const post = async (path, key, body) => {
          const res = await fetch(gw.info.url + path, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
          return res.json();
        };
        const owner = (await post('/admin/owners', 'bench-admin-key-0123456789', { label: 'bench' })).apiKey;
        const session = await post('/sessions', owner, {
          budget: { amount: '9000000000000000', currency: 'USD' }, purposes: ['api:search'], expiresAt: new Date(Date.now() + 3600_000).toISOString().replace(/\.\d+Z$/, 'Z'),
        });
        const token = session.sessionToken;
        // BENCH_INSTANCES=2: a second gateway process on the same database, connections split between them.
        const extraGws = [];
        for (let i = 1; i < Number(process.env.BENCH_INSTANCES ?? 1); i++) extraGws.push(await child(['--role=gateway'], store.env));
        const gwUrls = [gw.info.url, ...extraGws.map((g) => g.info.url)];
        let rr = 0;
        const pick = () => gwUrls[rr++ % gwUrls.length];
        for (const conns of [1, 50]) {
          const direct = await measure(conns, seconds, (a) => request(a, `${shop}/free`, {}));
          const proxied = await measure(conns, seconds, (a) => request(a, `${pick()}/proxy`, { authorization: `Bearer ${token}`, 'x-target-url': `${shop}/free`, 'x-target-method': 'GET' }, 'POST'));
          const paid = await measure(conns, seconds, (a) => request(a, `${pick()}/proxy`, { authorization: `Bearer ${token}`, 'x-target-url': `${shop}/search`, 'x-target-method': 'GET', 'x-ctl-purpose': 'api:search' }, 'POST'));
          for (const [kind, r] of [['direct (unpaid)', direct], ['via gateway, unpaid', proxied], ['via gateway, PAID', paid]]) {
            const ratio = kind.startsWith('direct') ? '' : `${(r.rps / direct.rps).toFixed(2)}×, +${(r.p50 - direct.p50).toFixed(2)} ms`;
            console.log(`${store.name.padEnd(11)} ${String(conns).padStart(5)}  ${kind.padEnd(22)} ${r.rps.toFixed(0).padStart(7)}  ${r.p50.toFixed(2).padStart(8)} ${r.p99.toFixed(2).padStart(8)}   ${ratio}${r.bad ? `  (${r.bad} non-200!)` : ''}`);
            rows.push({ store: store.name, conns, kind, ...r });
          }
        }
        // Every paid request must be in the books: spent = number of paid 200s (1 minor unit each).
        const view = await (await fetch(`${gw.info.url}/sessions/${session.sessionId}`, { headers: { authorization: `Bearer ${owner}` } })).json();
        const paidCount = rows.filter((r) => r.store === store.name && r.kind.includes('PAID')).reduce((a, r) => a + r.ok200, 0);
        for (const g of extraGws) await stop(g.child);
        console.log(`${store.name}: ${paidCount} paid answers, session spent ${view.spentMinor} minor units, reserved ${view.reservedMinor}: ${String(paidCount) === view.spentMinor && view.reservedMinor === '0' ? 'the books match' : 'MISMATCH'}`);
      } finally {
        await stop(gw.child);
      }
    }
  } finally {
    await stop(merchant.child);
    rmSync(dir, { recursive: true, force: true });
    if (schema) {
      const pg = (await import('pg')).default;
      const c = new pg.Client({ connectionString: pgUrl });
      await c.connect();
      await c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await c.end();
    }
  }
}

if (!role) await runBench();
