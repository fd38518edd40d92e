#!/usr/bin/env node
// The crash campaign: money under repeated faults at random points. Two gateway processes on one
// PostgreSQL (a schema of their own, dropped after) and one on SQLite; an x402 merchant (the stock
// @x402/express fixture on an in-memory EVM ledger) and an X-Payment merchant, each counting what
// it was paid; agents driving many small-ceiling sessions under Idempotency-Keys; a webhook
// receiver that is down for part of the run. At seeded random points a gateway is SIGKILLed and
// restarted, reconcile runs (at start and on its timer, gateway/payments/reconcile.ts), and the
// books are checked across the merchants, the receipts and the sessions (lib/campaign-books.mjs).
// Once per full run PostgreSQL itself is restarted. With --node the x402 money moves on a real EVM
// node (anvil, the stock facilitator settling over JSON-RPC) and the books are also checked
// against the payer's balance on it.
//
//   npm run compile && node bench/campaign.mjs --kills 100 [--seed S] [--no-pg-restart] [--node]
//   BENCH_PG_URL=postgres://postgres@127.0.0.1:5432/test (unreachable → SQLite only, said so)
// Exit status 1 on any invariant breach.
import { execSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { startGateway, stop, createOwner, pgReachable, dropSchema } from './lib/gateway-procs.mjs';
import { startXPayMerchant, startX402World, X402_NETWORK } from './lib/campaign-merchants.mjs';
import { createAgents } from './lib/campaign-agents.mjs';
import { readStore, checkBooks } from './lib/campaign-books.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const { downReceiver, freePort, kill } = await import(
  pathToFileURL(join(root, 'build', 'test', 'helpers', 'webhook-receiver.js')).href
);
const { generatePrivateKey, privateKeyToAccount } = await import('viem/accounts');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** mulberry32: a small seeded generator, so a run's kill points and choices follow from its seed. */
function seeded(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Timings that make a crash visible within a run: reconcile treats a payment open 1.5 s as left
// behind, and a stock merchant's authorization is cashable 10 s (the facilitator wants ≥ 6 s),
// plus 1 s of clock margin (the EVM ledger shares the gateways' clock).
const STALE_MS = 1500;
const X402_VALID_S = 10;
const X402_MARGIN_MS = 1000;
const CEILING = 60_000n; // a few payments of 7 000 and 10 000 minor units: sessions hit it

/**
 * One gateway process that can be killed and started again on the same port. One that dies
 * unbidden (not our SIGKILL) is counted in `died`, logged and started again.
 */
function gatewayProc(name, env, log) {
  const g = {
    name,
    up: false,
    url: undefined,
    child: undefined,
    incarnation: 0,
    reconciled: new Map(),
    died: 0,
    restarting: undefined,
    async start() {
      const { child, info } = await startGateway(env);
      g.child = child;
      g.url = info.url;
      g.incarnation++;
      g.up = true;
      child.once('exit', (code, signal) => {
        if (g.child !== child || !g.up) return;
        g.up = false;
        g.died++;
        log(`${name} DIED unbidden (${code ?? signal}); starting it again`);
        g.restarting = g
          .start()
          .catch((e) => log(`${name} did not start again: ${e.message}`))
          .finally(() => (g.restarting = undefined));
      });
      return info;
    },
    async kill() {
      await g.restarting;
      g.up = false;
      await kill(g.child);
    },
    /** Adds this incarnation's reconcile counters (its /metrics) to the tally. */
    async scrape() {
      if (!g.up) return;
      try {
        const text = await (await fetch(`${g.url}/metrics`)).text();
        const n = (outcome) =>
          Number(
            text.match(
              new RegExp(`^ctl_gateway_reconciled_payments_total\\{outcome="${outcome}"\\} (\\d+)`, 'm'),
            )?.[1] ?? 0,
          );
        g.reconciled.set(g.incarnation, { committed: n('committed'), released: n('released') });
      } catch {
        // down meanwhile: its last scrape stands
      }
    },
  };
  return g;
}

export async function runCampaign({
  kills = 10,
  seed = randomBytes(4).readUInt32BE(0),
  pgRestart = true,
  pgUrl = 'postgres://postgres@127.0.0.1:5432/test',
  x402Node = false,
  log = console.log,
  trace = () => {},
} = {}) {
  const started = performance.now();
  const phase = (what) => trace(`${((performance.now() - started) / 1000).toFixed(1)} s: ${what}`);
  const rng = seeded(seed);
  log(
    `crash campaign: ${kills} kills, seed ${seed}${pgRestart ? ', one PostgreSQL restart' : ''}` +
      `${x402Node ? ', x402 on an EVM node (anvil)' : ''}`,
  );
  const world = await startX402World({ maxTimeoutSeconds: X402_VALID_S, node: x402Node });
  const xpay = await startXPayMerchant();
  const hooks = await downReceiver();
  await hooks.up();
  const evmKey = generatePrivateKey();
  await world.fund(privateKeyToAccount(evmKey).address);
  const env = {
    CTL_X402_ASSETS: JSON.stringify({ USD: [{ network: X402_NETWORK, asset: world.asset }] }),
    CTL_X402_RPC_URL: JSON.stringify({ [X402_NETWORK]: world.rpcUrl }),
    CTL_GATEWAY_EVM_PRIVATE_KEY: evmKey,
    BENCH_X402_EXPIRY_MARGIN_MS: String(X402_MARGIN_MS),
    BENCH_RECONCILE_STALE_MS: String(STALE_MS),
    BENCH_RECONCILE_INTERVAL_MS: '500',
    BENCH_POOL_SIZE: '4',
    // The receiver is down for a while: retried every second at most, never dead-lettered.
    CTL_WEBHOOK_MAX_ATTEMPTS: '1000',
    CTL_WEBHOOK_BASE_DELAY_MS: '100',
    CTL_WEBHOOK_MAX_DELAY_MS: '1000',
    CTL_WEBHOOK_POLL_MS: '200',
    CTL_GATEWAY_RATE_LIMIT_OWNER: '0',
    CTL_GATEWAY_RATE_LIMIT_SESSION: '0',
  };

  const dir = mkdtempSync(join(tmpdir(), 'ctl-campaign-'));
  const stores = [];
  const pg = await pgReachable(pgUrl);
  if (pg) {
    const schema = `ctl_campaign_${randomBytes(4).toString('hex')}`;
    const dbEnv = { ...env, BENCH_DB: pgUrl, BENCH_SCHEMA: schema };
    stores.push({
      name: 'pg',
      dbUrl: pgUrl,
      schema,
      gws: [
        gatewayProc('pg-a', { ...dbEnv, BENCH_PORT: String(await freePort()) }, log),
        gatewayProc('pg-b', { ...dbEnv, BENCH_PORT: String(await freePort()) }, log),
      ],
    });
  } else log(`SKIPPED PostgreSQL: ${pgUrl} is unreachable (SQLite only)`);
  stores.push({
    name: 'sqlite',
    dbUrl: `sqlite:${join(dir, 'gateway.db')}`,
    gws: [
      gatewayProc(
        'sqlite',
        { ...env, BENCH_DB: `sqlite:${join(dir, 'gateway.db')}`, BENCH_PORT: String(await freePort()) },
        log,
      ),
    ],
  });
  const gateways = stores.flatMap((s) => s.gws);

  const perKill = [];
  let final;
  let pgRestarts = 0;
  const agents = [];
  try {
    // One at a time: the first start of a database runs its migrations.
    for (const g of gateways) {
      const info = await g.start();
      await world.fund(info.evmAddress);
    }
    for (const s of stores) {
      s.gateways = () => s.gws.filter((g) => g.up).map((g) => g.url);
      s.ownerKey = await createOwner(s.gws[0].url, `campaign ${s.name}`);
      s.ceiling = CEILING;
      s.webhookUrl = hooks.url;
      const a = createAgents({
        store: s,
        rng,
        agents: 3,
        merchants: {
          x402: (id) => `${world.merchantUrl}/data?req=${id}`,
          xpay: (id) => `${xpay.url}/search?req=${id}`,
        },
      });
      s.sessionIds = () => a.tally.sessions;
      agents.push(a);
    }
    const books = async (isFinal) => {
      // Read first, the node last: what moved is never older than the books it is compared with.
      const read = await Promise.all(stores.map((s) => readStore(s, hooks.url)));
      await world.refresh?.();
      return checkBooks({
        stores: read,
        xpay,
        x402: world,
        webhooks: hooks,
        final: isFinal,
        holdMarginMs: X402_MARGIN_MS + STALE_MS,
      });
    };
    /** Polls the books until they balance or `ms` pass (reconcile needs a pass or two); the last reading. */
    const settle = async (isFinal, ms) => {
      const end = Date.now() + ms;
      for (;;) {
        const r = await books(isFinal).catch((e) => ({ ok: false, error: e.message }));
        if (r.ok || Date.now() > end) return r;
        await sleep(250);
      }
    };

    phase('gateways up');
    for (const a of agents) a.start();
    let hooksUp = true;
    const receiverDown = [Math.max(1, Math.ceil(kills / 4)), Math.max(2, Math.ceil(kills / 2))];
    const pgRestartAt = Math.ceil(kills / 2);
    for (let k = 1; k <= kills; k++) {
      await sleep(300 + Math.floor(rng() * 900));
      const victim = gateways[Math.floor(rng() * gateways.length)];
      if (k === receiverDown[0]) await hooks.close().then(() => (hooksUp = false));
      if (k === receiverDown[1]) await hooks.up().then(() => (hooksUp = true));
      await victim.scrape();
      await victim.kill();
      const pgNow = pg && pgRestart && k === pgRestartAt;
      if (pgNow) {
        execSync('pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main restart', { stdio: 'ignore' });
        pgRestarts++;
      }
      phase(`kill ${k}: ${victim.name} killed`);
      await victim.start();
      phase(`kill ${k}: ${victim.name} restarted`);
      // Let reconcile run (at the start just made, then on its timer), then read the books.
      await Promise.all(agents.map((a) => a.pause()));
      const r = await settle(false, 6000);
      await Promise.all(gateways.map((g) => g.scrape()));
      perKill.push({
        k,
        victim: victim.name,
        pgRestart: pgNow,
        ok: r.ok,
        held: r.held,
        error: r.error,
        invariants: r.invariants,
      });
      if (!r.ok)
        log(
          `kill ${k} (${victim.name}): BREACH ${
            r.error ??
            JSON.stringify(
              Object.fromEntries(
                Object.entries(r.invariants)
                  .filter(([, v]) => !v.ok)
                  .map(([n, v]) => [n, v.breaches.slice(0, 5)]),
              ),
            )
          }`,
        );
      phase(`kill ${k}: books read`);
      for (const a of agents) a.resume();
    }

    // Final: no more kills; every parked request answered once its authorization is dead and
    // reconciled, every reservation settled, every webhook delivered.
    for (const a of agents) await a.stop();
    if (!hooksUp) await hooks.up();
    const deadline = Date.now() + X402_VALID_S * 1000 + X402_MARGIN_MS + STALE_MS + 15_000;
    const open = (await Promise.all(agents.map((a) => a.finish(deadline)))).reduce((x, y) => x + y, 0);
    phase('parked requests answered');
    final = await settle(true, Math.max(5000, deadline - Date.now()));
    phase('final books read');
    await Promise.all(gateways.map((g) => g.scrape()));
    if (open) final = { ...final, ok: false, unanswered: open };
  } finally {
    for (const a of agents) a.close();
    for (const g of gateways) {
      await g.restarting;
      if (!g.up) continue;
      g.up = false;
      await stop(g.child);
    }
    await hooks.close();
    await xpay.close();
    await world.close();
    rmSync(dir, { recursive: true, force: true });
    for (const s of stores)
      if (s.schema) await dropSchema(pgUrl, s.schema).catch((e) => log(`dropping ${s.schema}: ${e.message}`));
  }

  const sum = (f) => agents.reduce((a, x) => a + f(x.tally), 0);
  const reconciled = { committed: 0, released: 0 };
  for (const g of gateways)
    for (const r of g.reconciled.values()) ((reconciled.committed += r.committed), (reconciled.released += r.released));
  const invariantNames = Object.keys(final?.invariants ?? perKill[0]?.invariants ?? {});
  const figures = {
    seed,
    kills: perKill.length,
    pgRestarts,
    stores: stores.map((s) => s.name),
    diedUnbidden: gateways.reduce((a, g) => a + g.died, 0),
    requests: sum((t) => t.requests),
    paid: sum((t) => t.paid),
    refused: sum((t) => t.refused),
    retries: sum((t) => t.retries),
    parked: sum((t) => t.parked),
    refusedBy: agents.reduce(
      (m, a) => (Object.entries(a.tally.byCode).forEach(([c, n]) => (m[c] = (m[c] ?? 0) + n)), m),
      {},
    ),
    sessions: sum((t) => t.sessions.length),
    transfers: final?.transfers,
    receipts: final?.receipts,
    reconciled,
    webhooks: {
      received: hooks.got.length,
      distinct: hooks.ids().size,
      duplicates: hooks.got.length - hooks.ids().size,
    },
    invariants: Object.fromEntries(
      invariantNames.map((n) => [
        n,
        {
          afterEachKill: `${perKill.filter((p) => p.invariants?.[n]?.ok).length}/${perKill.length}`,
          final: final?.invariants?.[n]?.ok
            ? 'ok'
            : `BREACH ${JSON.stringify(final?.invariants?.[n]?.breaches?.slice(0, 3) ?? final?.error)}`,
        },
      ]),
    ),
    heldAtKills: perKill.reduce((a, p) => a + (p.held ?? 0), 0),
    ...(x402Node ? { chainMovedMinor: String(world.chainMoved) } : {}),
    durationS: Number(((performance.now() - started) / 1000).toFixed(1)),
  };
  // A gateway that dies of a fault it should ride out (a PostgreSQL restart) fails the run too.
  const ok = Boolean(final?.ok) && perKill.every((p) => p.ok) && figures.diedUnbidden === 0;
  return { ok, figures, perKill, final };
}

export function printFigures(f, log = console.log) {
  log(
    `stores ${f.stores.join(' + ')}; seed ${f.seed}; ${f.kills} kills, ${f.pgRestarts} ` +
      `PostgreSQL restart(s), ${f.diedUnbidden} gateway(s) died unbidden; ${f.durationS} s`,
  );
  log(
    `requests ${f.requests}: paid ${f.paid}, refused ${f.refused} ${JSON.stringify(f.refusedBy)}; ` +
      `retries ${f.retries}, parked until the end ${f.parked}; sessions ${f.sessions}`,
  );
  log(
    `money: ${f.transfers} transfers (ledger rail + EVM), ${f.receipts} receipts; reconciled ` +
      `${f.reconciled.committed} committed, ${f.reconciled.released} released; x402 reservations ` +
      `held at kill checks ${f.heldAtKills}`,
  );
  if (f.chainMovedMinor !== undefined) log(`x402 on the node: ${f.chainMovedMinor} minor units left the payer`);
  log(
    `webhooks: ${f.webhooks.received} deliveries, ${f.webhooks.distinct} distinct ids, ` +
      `${f.webhooks.duplicates} repeated deliveries of an id`,
  );
  for (const [n, r] of Object.entries(f.invariants))
    log(`  ${n.padEnd(24)} after each kill ${r.afterEachKill}; final ${r.final}`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const arg = (name) => {
    const i = process.argv.indexOf(`--${name}`);
    return i > 0 ? process.argv[i + 1] : undefined;
  };
  const r = await runCampaign({
    kills: Number(arg('kills') ?? 100),
    seed: arg('seed') !== undefined ? Number(arg('seed')) : undefined,
    pgRestart: !process.argv.includes('--no-pg-restart'),
    pgUrl: process.env.BENCH_PG_URL,
    x402Node: process.argv.includes('--node'),
    trace: process.argv.includes('--trace') ? console.log : undefined,
  });
  printFigures(r.figures);
  console.log(r.ok ? 'campaign: every invariant held' : 'campaign: INVARIANT BREACH');
  process.exit(r.ok ? 0 : 1);
}
