// Shared bench pieces: a 402 merchant (X-Payment, paid on the gateway's ledger rail) and a
// gateway, each in its own process (this file run with --role=merchant|gateway), plus the
// client-side helpers to start them, make an owner and a session, and send keep-alive requests.
// Used by bench/gateway.mjs (throughput), bench/soak.mjs (memory over time), bench/idempotency.mjs
// and bench/rate-limit.mjs (what a key and counting limits cost).
import { spawn } from 'node:child_process';
import http from 'node:http';
import { readFileSync, readdirSync, readlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const build = (p) => pathToFileURL(join(root, 'build', p)).href;
export const ADMIN_KEY = 'bench-admin-key-0123456789';
const role =
  import.meta.url === pathToFileURL(process.argv[1] ?? '').href
    ? process.argv.find((a) => a.startsWith('--role='))?.slice(7)
    : undefined;

if (role === 'merchant') {
  // 402 with X-Payment unless paid; /free always 200. Same small JSON body either way.
  const body = JSON.stringify({ results: [1, 2, 3] });
  const seen = { unpaid402: 0, paid: 0, free: 0 }; // GET /__count: round trips the gateway made
  const server = http.createServer((req, res) => {
    if (req.url === '/__count') return res.end(JSON.stringify(seen));
    seen[req.url === '/free' ? 'free' : req.headers['x-payment-receipt'] ? 'paid' : 'unpaid402']++;
    if (req.url === '/free' || req.headers['x-payment-receipt']) {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      return res.end(body);
    }
    res.writeHead(402, {
      'x-payment': '{"amount":"1","currency":"USD","address":"bench-merchant"}',
      'content-length': 0,
    });
    res.end();
  });
  server.keepAliveTimeout = 60_000;
  // The same shop over HTTPS, its certificate from a CA of its own (the gateway is told to trust
  // it, BENCH_UPSTREAM_CA): what the egress proxy's HTTPS leg costs (bench/gateway.mjs).
  const { makeCa, mintLeaf, importSigningKey, x509Library } = await import(build('gateway/egress/ca.js'));
  const { webcrypto } = await import('node:crypto');
  const https = await import('node:https');
  const ca = await makeCa('CN=bench merchant CA', Date.now());
  const alg = { name: 'ECDSA', namedCurve: 'P-256' };
  const keys = await webcrypto.subtle.generateKey(alg, true, ['sign', 'verify']);
  const cert = await mintLeaf(
    new (await x509Library()).X509Certificate(ca.certPem),
    await importSigningKey(ca.keyPem),
    keys.publicKey,
    '127.0.0.1',
    Date.now(),
  );
  const der = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey)).toString('base64');
  const key = `-----BEGIN PRIVATE KEY-----\n${der}\n-----END PRIVATE KEY-----\n`;
  const tls = https.createServer({ key, cert }, server.listeners('request')[0]);
  tls.keepAliveTimeout = 60_000;
  await new Promise((r) => tls.listen(0, '127.0.0.1', r));
  server.listen(0, '127.0.0.1', () =>
    console.log(JSON.stringify({ port: server.address().port, tlsPort: tls.address().port, caPem: ca.certPem })),
  );
} else if (role === 'gateway') {
  const { openDatabase, listen, silentLogger } = await import(build('service-kit/index.js'));
  const { openGateway } = await import(build('gateway/server.js'));
  const db = await openDatabase(process.env.BENCH_DB, {
    schema: process.env.BENCH_SCHEMA || undefined,
    poolSize: Number(process.env.BENCH_POOL_SIZE ?? 20),
  });
  // BENCH_SQL_COUNTS=<file>: count transactions and statements (written on SIGTERM), for the
  // per-payment cost in docs/scaling.md. Wraps the SqlDatabase from outside; the gateway is unchanged.
  const counts = { tx: 0, statements: 0, outsideTx: 0, byVerb: {}, bySql: {} };
  if (process.env.BENCH_SQL_COUNTS) {
    countSql(db, counts);
    process.on('SIGUSR2', () => writeFileSync(process.env.BENCH_SQL_COUNTS, JSON.stringify(counts)));
  }
  const { gatewayRateLimitsFromEnv } = await import(build('service-kit/service-limits.js'));
  // One session takes thousands of requests a second here: no rate limit unless the environment
  // sets one (bench/rate-limit.mjs measures what counting costs).
  const rateLimits = gatewayRateLimitsFromEnv({
    CTL_GATEWAY_RATE_LIMIT_OWNER: '0',
    CTL_GATEWAY_RATE_LIMIT_SESSION: '0',
    ...process.env,
  });
  // The x402 and webhook variables as `ctl gateway` reads them (CTL_X402_*, CTL_WEBHOOK_*), and
  // the reconcile timings and a fixed port for bench/campaign.mjs, which kills and restarts gateways.
  const { readGatewayConfig } = await import(build('gateway/config.js'));
  const fromEnv = readGatewayConfig(process.env);
  const envMs = (name) => (process.env[name] ? Number(process.env[name]) : undefined);
  const gw = await openGateway({
    db,
    adminKey: ADMIN_KEY,
    logger: silentLogger(),
    targets: { allowPrivate: true },
    rateLimits,
    webhooks: fromEnv.webhooks,
    x402: { ...fromEnv.x402, expiryMarginMs: envMs('BENCH_X402_EXPIRY_MARGIN_MS') },
    reconcileStaleMs: envMs('BENCH_RECONCILE_STALE_MS'),
    reconcileIntervalMs: envMs('BENCH_RECONCILE_INTERVAL_MS'),
    upstreamCa: process.env.BENCH_UPSTREAM_CA ? [process.env.BENCH_UPSTREAM_CA] : undefined,
    // CTL_GATEWAY_LOG=0: no transparency log (bench/gateway.mjs BENCH_LOG=compare measures its cost).
    log: fromEnv.log,
  });
  const srv = await listen(gw.app, { port: Number(process.env.BENCH_PORT ?? 0) });
  srv.server.keepAliveTimeout = 60_000;
  // The egress proxy beside it (gateway/egress/proxy-server.ts), as CTL_GATEWAY_EGRESS_PORT starts it.
  const { startEgressProxy } = await import(build('gateway/egress/proxy-server.js'));
  const egress = await startEgressProxy({ handle: gw.app.callback(), hooks: gw.egress, port: 0, host: '127.0.0.1' });
  console.log(JSON.stringify({ url: srv.url, egressPort: egress.port, pid: process.pid, evmAddress: gw.evmAddress }));
  // BENCH_STATS_MS: one JSON line of this process's memory and event-loop delay per interval
  // (bench/soak.mjs reads them from stdout).
  if (process.env.BENCH_STATS_MS) {
    const { monitorEventLoopDelay } = await import('node:perf_hooks');
    const eld = monitorEventLoopDelay({ resolution: 10 });
    eld.enable();
    setInterval(() => {
      const m = process.memoryUsage();
      console.log(
        JSON.stringify({
          stats: {
            rss: m.rss,
            heapUsed: m.heapUsed,
            heapTotal: m.heapTotal,
            external: m.external,
            arrayBuffers: m.arrayBuffers,
            eldP50: eld.percentile(50) / 1e6,
            eldP99: eld.percentile(99) / 1e6,
            eldMax: eld.max / 1e6,
          },
        }),
      );
      eld.reset();
    }, Number(process.env.BENCH_STATS_MS)).unref();
  }
  process.on('SIGTERM', async () => {
    if (process.env.BENCH_SQL_COUNTS) writeFileSync(process.env.BENCH_SQL_COUNTS, JSON.stringify(counts));
    await egress.close().catch(() => {});
    await srv.close().catch(() => {});
    await gw.close();
    await db.close();
    process.exit(0);
  });
}

function countSql(db, counts) {
  const verb = (sql) => sql.trim().split(/\s+/)[0].toUpperCase();
  const wrap = (target, inTx) => {
    for (const m of ['all', 'get', 'run', 'exec']) {
      const orig = target[m].bind(target);
      target[m] = (sql, params) => {
        counts.statements++;
        if (!inTx) counts.outsideTx++;
        counts.byVerb[verb(sql)] = (counts.byVerb[verb(sql)] ?? 0) + 1;
        const text = `${inTx ? 'tx ' : ''}${sql.replace(/\s+/g, ' ').trim().slice(0, 90)}`;
        counts.bySql[text] = (counts.bySql[text] ?? 0) + 1;
        return orig(sql, params);
      };
    }
  };
  wrap(db, false);
  // A statement in a group commit (database.ts getGrouped): its own change, its transaction shared.
  const grouped = db.getGrouped.bind(db);
  db.getGrouped = (key, sql, params) => {
    counts.statements++;
    counts.grouped = (counts.grouped ?? 0) + 1;
    counts.byVerb[verb(sql)] = (counts.byVerb[verb(sql)] ?? 0) + 1;
    const text = `grouped ${sql.replace(/\s+/g, ' ').trim().slice(0, 90)}`;
    counts.bySql[text] = (counts.bySql[text] ?? 0) + 1;
    return grouped(key, sql, params);
  };
  const tx = db.tx.bind(db);
  db.tx = (fn, options) => {
    counts.tx++;
    return tx((q) => {
      const counted = Object.create(q);
      for (const m of ['all', 'get', 'run', 'exec']) counted[m] = q[m].bind(q);
      wrap(counted, true);
      return fn(counted);
    }, options);
  };
}

/** The local ports of `pid`'s TCP connections to port 5432 (Linux /proc: its socket inodes, found in /proc/net/tcp). */
function pgClientPorts(pid) {
  const inodes = new Set();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]);
    } catch {
      // closed meanwhile
    }
  }
  const ports = new Set();
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6'])
    for (const line of readFileSync(file, 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length > 9 && inodes.has(f[9]) && f[2].endsWith(':1538')) ports.add(parseInt(f[1].split(':')[1], 16));
    }
  return ports;
}

/**
 * Clock ticks (10 ms) of the PostgreSQL backends serving the gateway process `pid`, by backend
 * pid (their command line names the client's port): the database's work for this gateway only,
 * whatever else the server runs meanwhile (other databases' backends, its background writers).
 */
export function backendTicks(pid) {
  const ports = pgClientPorts(pid);
  const out = new Map();
  for (const p of readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      if (readFileSync(`/proc/${p}/comm`, 'utf8').trim() !== 'postgres') continue;
      const port = /\((\d+)\)/.exec(readFileSync(`/proc/${p}/cmdline`, 'utf8'))?.[1];
      if (!port || !ports.has(Number(port))) continue;
      const f = readFileSync(`/proc/${p}/stat`, 'utf8');
      const r = f.slice(f.lastIndexOf(')') + 2).split(' ');
      out.set(p, Number(r[11]) + Number(r[12]));
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

/** Ticks used between two backendTicks() samples (a backend that appeared meanwhile counts from 0). */
export const ticksBetween = (a, b) => [...b].reduce((sum, [p, t]) => sum + t - (a.get(p) ?? 0), 0);

/** Starts this file as `--role=…` in a child process; resolves with its first JSON line. */
export function child(args, env = {}, nodeArgs = []) {
  const c = spawn(process.execPath, [...nodeArgs, fileURLToPath(import.meta.url), ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
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
export const startMerchant = () => child(['--role=merchant']);
export const startGateway = (env, nodeArgs = []) => child(['--role=gateway'], env, nodeArgs);

export function stop(c) {
  return new Promise((r) => {
    if (c.exitCode !== null) return r();
    c.once('exit', r);
    c.kill('SIGTERM');
  });
}

/** One request, body discarded; resolves with its status and response headers. */
export function exchange(agent, url, headers, method = 'GET') {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = http.request(
      { hostname: u.hostname, port: u.port, path: u.pathname + u.search, method, headers, agent },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode, headers: res.headers }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}
export const request = (agent, url, headers, method = 'GET') =>
  exchange(agent, url, headers, method).then((r) => r.status);

async function post(base, path, key, body) {
  const res = await fetch(base + path, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return res.json();
}
export async function createOwner(gatewayUrl, label = 'bench') {
  return (await post(gatewayUrl, '/admin/owners', ADMIN_KEY, { label })).apiKey;
}
/**
 * A session allowed `api:search` for an hour; `budgetMinor` as a decimal string; `extra` more of its config
 * (webhookUrl, …).
 */
export async function createSession(gatewayUrl, ownerKey, budgetMinor = '9000000000000000', extra = {}) {
  return post(gatewayUrl, '/sessions', ownerKey, {
    budget: { amount: budgetMinor, currency: 'USD' },
    purposes: ['api:search'],
    expiresAt: new Date(Date.now() + 3600_000).toISOString().replace(/\.\d+Z$/, 'Z'),
    ...extra,
  });
}
export async function sessionView(gatewayUrl, ownerKey, sessionId) {
  return (
    await fetch(`${gatewayUrl}/sessions/${sessionId}`, { headers: { authorization: `Bearer ${ownerKey}` } })
  ).json();
}
/** One paid request through the gateway (the merchant answers 402, the gateway pays, retries). */
export const paidRequest = (agent, gatewayUrl, token, shop) =>
  request(
    agent,
    `${gatewayUrl}/proxy`,
    {
      authorization: `Bearer ${token}`,
      'x-target-url': `${shop}/search`,
      'x-target-method': 'GET',
      'x-ctl-purpose': 'api:search',
    },
    'POST',
  );

export async function pgReachable(url) {
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
/**
 * The stores a gateway bench runs on: SQLite in a temporary directory, and PostgreSQL in a fresh
 * schema when `pgUrl` answers. `dir` is that directory; `cleanup()` removes it and drops the schema.
 */
export async function benchStores(pgUrl, prefix = 'ctl-bench-') {
  const { mkdtempSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const { randomBytes } = await import('node:crypto');
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const stores = [{ name: 'SQLite', env: { BENCH_DB: `sqlite:${join(dir, 'gateway.db')}` } }];
  let schema;
  if (await pgReachable(pgUrl)) {
    schema = `ctl_bench_${randomBytes(4).toString('hex')}`;
    stores.push({ name: 'PostgreSQL', env: { BENCH_DB: pgUrl, BENCH_SCHEMA: schema } });
  } else console.log(`SKIPPED PostgreSQL: ${pgUrl} is unreachable`);
  return {
    dir,
    stores,
    async cleanup() {
      rmSync(dir, { recursive: true, force: true });
      if (schema) await dropSchema(pgUrl, schema);
    },
  };
}

export async function dropSchema(url, schema) {
  const pg = (await import('pg')).default;
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  await c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await c.end();
}

/**
 * Closed loop: `conns` workers, one request at a time each, for `seconds` after `warmMs` of
 * warm-up; `send(agent)` resolves with the status. Counts answers other than 200 as `bad`.
 */
export async function closedLoop(conns, seconds, send, warmMs = 300) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: conns });
  for (const warm = performance.now() + warmMs; performance.now() < warm;)
    await Promise.all(Array.from({ length: conns }, () => send(agent)));
  const lat = [];
  let bad = 0;
  const end = performance.now() + seconds * 1000;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: conns }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        if ((await send(agent)) !== 200) bad++;
        lat.push(performance.now() - t);
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  agent.destroy();
  lat.sort((a, b) => a - b);
  return { n: lat.length, rps: lat.length / elapsed, p50: lat[Math.floor(lat.length / 2)], bad };
}
