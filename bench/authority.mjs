#!/usr/bin/env node
// Policy authority throughput through HTTP: revocation checks and grant issuance
// per second, each as a ratio of a bare Koa JSON route measured in the same run, same process,
// same client. Target: revocation check ≥ 0.5 of the bare route.
//
//   npm run compile && node bench/authority.mjs [--seconds 3] [--connections 32] [--rounds 3] [--db sqlite|postgres]
//
// The servers (bare Koa and the real authority on a temporary SQLite file or a fresh PostgreSQL
// schema, request logging on, written to /dev/null) run in a child process; this process is only
// the load generator, so client and server do not share one event loop. The revocation check
// repeats one grant, so it measures the authority's cached path (authority/README.md); a miss
// costs one indexed read.
import { fork } from 'node:child_process';
import { request, Agent } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const ADMIN = 'bench-admin-key-0123456789';

if (process.argv[2] === '--serve') {
  await serve();
} else {
  await main();
}

async function serve() {
  const build = new URL('../build/', import.meta.url);
  const { default: Koa } = await import('koa');
  const { default: pino } = await import('pino');
  const kit = await import(new URL('service-kit/index.js', build).href);
  const { readAuthorityConfig } = await import(new URL('authority/config.js', build).href);
  const { createAuthority } = await import(new URL('authority/server.js', build).href);

  const bare = new Koa();
  bare.use((ctx) => {
    ctx.body = { grantId: 'g', revoked: false };
  });
  const bareSrv = await kit.listen(bare);

  const dir = mkdtempSync(join(tmpdir(), 'ctl-bench-'));
  const db =
    process.argv[3] === 'postgres' ? 'postgres://postgres@127.0.0.1:5432/test' : `sqlite:${join(dir, 'authority.db')}`;
  const schema = process.argv[3] === 'postgres' ? `ctl_bench_${process.pid}` : undefined;
  // One client address sends everything here: the rate limits count every request (their cost is
  // measured) but are set too high to refuse any, unless the environment sets them.
  const limits = {
    CTL_AUTHORITY_RATE_LIMIT_KEY: process.env.CTL_AUTHORITY_RATE_LIMIT_KEY ?? '1000000000/60s',
    CTL_AUTHORITY_RATE_LIMIT_ADDRESS: process.env.CTL_AUTHORITY_RATE_LIMIT_ADDRESS ?? '1000000000/60s',
  };
  const config = readAuthorityConfig({
    PORT: '0',
    DATABASE_URL: db,
    CTL_ADMIN_API_KEY: ADMIN,
    CTL_ISSUER_DOMAIN: 'bench.local',
    CTL_REVOCATION_BASE_URL: 'http://127.0.0.1:1',
    ...limits,
  });
  const logger = kit.createLogger({
    name: 'bench',
    level: 'info',
    destination: pino.destination({ dest: '/dev/null', sync: false }),
  });
  const authority = await createAuthority(config, { logger, schema, env: {} });
  const authSrv = await kit.listen(authority.app);
  process.send({ bare: bareSrv.url, authority: authSrv.url, database: authority.store.description });
  process.on('message', async (m) => {
    if (m === 'stop') {
      await bareSrv.close();
      await authSrv.close();
      await authority.close();
      if (schema) {
        const { default: pg } = await import('pg');
        const c = new pg.Client({ connectionString: db });
        await c.connect();
        await c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
        await c.end();
      }
      rmSync(dir, { recursive: true, force: true });
      process.exit(0);
    }
  });
}

function once(agent, method, url, body, headers) {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, agent, headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('error', reject);
    if (body) req.end(body);
    else req.end();
  });
}

/** Requests per second over `seconds` with `connections` concurrent keep-alive clients. */
async function load(label, method, url, body, headers, { seconds, connections, expect }) {
  const agent = new Agent({ keepAlive: true, maxSockets: connections });
  const warmUntil = Date.now() + 500;
  const run = async (until, count) => {
    let n = 0;
    await Promise.all(
      Array.from({ length: connections }, async () => {
        while (Date.now() < until) {
          const status = await once(agent, method, url, body, headers);
          if (status !== expect) throw new Error(`${label}: HTTP ${status}`);
          if (count) n++;
        }
      }),
    );
    return n;
  };
  await run(warmUntil, false);
  const started = performance.now();
  const n = await run(Date.now() + seconds * 1000, true);
  agent.destroy();
  return n / ((performance.now() - started) / 1000);
}

async function main() {
  const seconds = Number(arg('seconds', '3'));
  const connections = Number(arg('connections', '32'));
  const dbKind = arg('db', 'sqlite');
  const child = fork(fileURLToPath(import.meta.url), ['--serve', dbKind], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const urls = await new Promise((resolve, reject) => {
    child.once('message', resolve);
    child.once('exit', (code) => reject(new Error(`server exited ${code}`)));
  });
  const json = { 'content-type': 'application/json', authorization: `Bearer ${ADMIN}` };
  const post = async (path, body) => {
    const res = await fetch(urls.authority + path, { method: 'POST', headers: json, body: JSON.stringify(body) });
    if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
    return res.json();
  };
  const { generateKeyPair } = await import(new URL('../build/src/index.js', import.meta.url).href);
  const wallet = await generateKeyPair({ alg: 'EdDSA' });
  const { policyHash } = await post('/policies', { policy: { bench: true } });
  const grantBody = JSON.stringify({
    policyHash,
    actorKey: wallet.publicJwk,
    allowedRails: ['x402'],
    allowedAssets: [{ standard: 'iso4217', code: 'USD' }],
    maxAmountMinor: '5000',
    currency: 'USD',
    expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
  });
  const grant = await post('/grants', JSON.parse(grantBody));
  const opts = { seconds, connections };

  // Rounds of bare → revocation → grants; each ratio is taken within its round (the machine's
  // load drifts between rounds), and the median round is reported.
  const rounds = Number(arg('rounds', '3'));
  const rows = [];
  for (let i = 0; i < rounds; i++) {
    const bare = await load(
      'bare',
      'GET',
      `${urls.bare}/revoke?grantId=${grant.grantId}`,
      undefined,
      {},
      { ...opts, expect: 200 },
    );
    const revocation = await load(
      'revocation',
      'GET',
      `${urls.authority}/revoke?grantId=${grant.grantId}`,
      undefined,
      {},
      { ...opts, expect: 200 },
    );
    const grants = await load('grants', 'POST', `${urls.authority}/grants`, grantBody, json, { ...opts, expect: 201 });
    const bareAfter = await load(
      'bare',
      'GET',
      `${urls.bare}/revoke?grantId=${grant.grantId}`,
      undefined,
      {},
      { ...opts, expect: 200 },
    );
    const ref = (bare + bareAfter) / 2;
    rows.push({ bare: ref, revocation, grants, revRatio: revocation / ref, grantRatio: grants / ref });
  }
  const median = (k) => [...rows].map((r) => r[k]).sort((a, b) => a - b)[Math.floor(rows.length / 2)];
  const fmt = (x) => Math.round(x).toLocaleString('en-US');
  console.log(
    `authority bench: node ${process.version}, ${connections} keep-alive connections, ` +
      `${seconds} s per measure, ${rounds} rounds, database ${urls.database}`,
  );
  for (const [i, r] of rows.entries()) {
    console.log(
      `  round ${i + 1}: bare ${fmt(r.bare)} req/s, revocation ${fmt(r.revocation)} req/s ` +
        `(${r.revRatio.toFixed(2)}), grants ${fmt(r.grants)} req/s (${r.grantRatio.toFixed(3)})`,
    );
  }
  console.log(`  median: bare Koa JSON route ${fmt(median('bare'))} req/s`);
  console.log(
    `          GET /revoke?grantId=  ${fmt(median('revocation'))} req/s   ratio ${median('revRatio').toFixed(2)} ` +
      '  (target ≥ 0.50)',
  );
  console.log(
    `          POST /grants (signed) ${fmt(median('grants'))} req/s   ratio ${median('grantRatio').toFixed(3)}`,
  );
  const revRatio = median('revRatio');
  child.send('stop');
  await new Promise((r) => child.once('exit', r));
  process.exitCode = revRatio >= 0.5 ? 0 : 1;
}
