/**
 * The failover campaign (docs/operations.md "A standby and failover"): a PostgreSQL primary with a
 * synchronous standby of their own (test/helpers/pg-standby.ts), two gateway processes on the
 * multi-host URL (`target_session_attrs=read-write`), 200 payments sent at once to an x402 and an
 * X-Payment merchant, and a probe paying one request after another. Mid-load the primary is
 * SIGKILLed with all its backends, and after a detection delay the standby is promoted.
 *
 * Every answer is 2xx, 402/403 or 503 within ANSWER_BOUND_MS, no gateway dies, and after
 * reconcile the books balance across the merchants, the receipts and the sessions
 * (bench/lib/campaign-books.mjs: nothing paid twice, spent = receipts, nothing left reserved),
 * and every receipt a client was given is on the promoted standby.
 *
 * CTL_TEST_FAILOVER_RUNS=5 repeats it (default 1, to stay under the slow tier's time per file).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import pg from 'pg';
import { replicatedPairMissing, startReplicatedPair, type ReplicatedPair } from '../helpers/pg-standby.js';
import { freePort } from '../helpers/ports.js';

const bench = (p: string) => new URL(`../../../bench/lib/${p}`, import.meta.url).href;

const PAYMENTS = 200;
const SESSIONS = 20;
/** A session of 60 000 takes 6 to 8 of these payments (7 000 and 10 000): some answers are 402. */
const CEILING = 60_000n;
/** The longest any answer may take: past it a request counts as hung. */
const ANSWER_BOUND_MS = 60_000;
/** How long a failover manager takes to notice the primary is gone before it promotes. */
const DETECT_MS = 1000;
/** Kill once this many of the 200 are answered: the rest are in flight or not yet sent. */
const KILL_AFTER = 40;
/**
 * Reconcile's staleness: above the slowest answer under this load (tens of seconds on a shared
 * two-core machine), as the default (120 s) is above a gateway's, so reconcile settles what was
 * left behind by the kill, never a payment whose request is still at work.
 */
const STALE_MS = 45_000;
const X402_VALID_S = 30;
const X402_MARGIN_MS = 1000;
const SCHEMA = 'ctl_failover';

interface Answer {
  status: number | 'hung' | string;
  code?: string;
  receiptId?: string;
  /** The gateway's error message, for a report. */
  message?: string;
  ms: number;
  startedAt: number;
  endedAt: number;
}

async function pay(gateway: string, token: string, target: string, key: string): Promise<Answer> {
  const startedAt = performance.now();
  const done = (a: Omit<Answer, 'ms' | 'startedAt' | 'endedAt'>): Answer => {
    const endedAt = performance.now();
    return { ...a, ms: endedAt - startedAt, startedAt, endedAt };
  };
  try {
    const res = await fetch(`${gateway}/proxy`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'x-target-url': target,
        'x-target-method': 'GET',
        'x-ctl-purpose': 'api:search',
        'idempotency-key': key,
      },
      signal: AbortSignal.timeout(ANSWER_BOUND_MS),
    });
    const body = await res.text();
    return done({
      status: res.status,
      code: res.headers.get('x-ctl-gateway-error') ?? undefined,
      ...(res.status >= 300 ? { message: body.slice(0, 300) } : {}),
      receiptId: res.headers.get('x-ctl-receipt-id') ?? undefined,
    });
  } catch (e) {
    const name = (e as Error).name;
    return done({ status: name === 'TimeoutError' ? 'hung' : `error ${(e as Error).message}` });
  }
}

const allowed = (s: Answer['status']) =>
  typeof s === 'number' && ((s >= 200 && s < 300) || s === 402 || s === 403 || s === 503);

async function oneRun(run: number) {
  const procs = await import(bench('gateway-procs.mjs'));
  const merchants = await import(bench('campaign-merchants.mjs'));
  const books = await import(bench('campaign-books.mjs'));
  const { generatePrivateKey, privateKeyToAccount } = await import('viem/accounts');
  const log = (m: string) => console.log(`run ${run}: ${m}`);

  const pair: ReplicatedPair = await startReplicatedPair();
  const world = await merchants.startX402World({ maxTimeoutSeconds: X402_VALID_S });
  const xpay = await merchants.startXPayMerchant();
  const evmKey = generatePrivateKey();
  world.fund(privateKeyToAccount(evmKey).address);
  const env = {
    BENCH_DB: pair.multiHostUrl,
    BENCH_SCHEMA: SCHEMA,
    BENCH_POOL_SIZE: '10',
    CTL_X402_ASSETS: JSON.stringify({ USD: [{ network: merchants.X402_NETWORK, asset: world.asset }] }),
    CTL_X402_RPC_URL: JSON.stringify({ [merchants.X402_NETWORK]: world.rpcUrl }),
    CTL_GATEWAY_EVM_PRIVATE_KEY: evmKey,
    BENCH_X402_EXPIRY_MARGIN_MS: String(X402_MARGIN_MS),
    BENCH_RECONCILE_STALE_MS: String(STALE_MS),
    BENCH_RECONCILE_INTERVAL_MS: '500',
    CTL_GATEWAY_RATE_LIMIT_OWNER: '0',
    CTL_GATEWAY_RATE_LIMIT_SESSION: '0',
  };
  const gateways: Array<{ url: string; child: import('node:child_process').ChildProcess }> = [];
  const died: string[] = [];
  let stopping = false;
  try {
    // One at a time: the first start runs the migrations.
    for (const name of ['a', 'b']) {
      const { child, info } = await procs.startGateway({ ...env, BENCH_PORT: String(await freePort()) });
      child.once('exit', (code: number | null, signal: string | null) => {
        if (!stopping) died.push(`${name}: ${code ?? signal}`);
      });
      gateways.push({ url: info.url, child });
      world.fund(info.evmAddress);
    }
    const ownerKey = await procs.createOwner(gateways[0]!.url, 'failover');
    const sessions: Array<{ sessionId: string; sessionToken: string }> = [];
    for (let i = 0; i < SESSIONS; i++)
      sessions.push(await procs.createSession(gateways[0]!.url, ownerKey, String(CEILING)));
    const probeSession = await procs.createSession(gateways[1]!.url, ownerKey, '100000000');
    const target = (i: number, tag: string) =>
      i % 2 === 0 ? `${world.merchantUrl}/data?req=${tag}` : `${xpay.url}/search?req=${tag}`;

    // The probe: one payment after another, alternating gateways, from before the kill until a
    // payment succeeds after the promotion: the time without payments is read from its answers.
    let killedAt = Number.POSITIVE_INFINITY;
    let promotedAt = Number.POSITIVE_INFINITY;
    const probe: Answer[] = [];
    let probing = true;
    const probeLoop = (async () => {
      for (let i = 0; probing; i++) {
        const a = await pay(gateways[i % 2]!.url, probeSession.sessionToken, target(i, `probe-${run}-${i}`), `p-${i}`);
        probe.push(a);
        if (a.startedAt > promotedAt && a.status === 200) break;
        if (a.status !== 200) await new Promise((r) => setTimeout(r, 50));
      }
    })();

    // The burst: all 200 at once, across both gateways and both merchants.
    let answered = 0;
    let killed!: () => void;
    const killPoint = new Promise<void>((r) => (killed = r));
    const burst = Promise.all(
      Array.from({ length: PAYMENTS }, (_, i) =>
        pay(
          gateways[i % 2]!.url,
          sessions[i % SESSIONS]!.sessionToken,
          target(Math.floor(i / 2), `b-${run}-${i}`),
          `b-${i}`,
        ).then((a) => {
          if (++answered === KILL_AFTER) killed();
          return a;
        }),
      ),
    );
    await killPoint;
    pair.killPrimary();
    killedAt = performance.now();
    log(`primary killed after ${KILL_AFTER} answers`);
    await new Promise((r) => setTimeout(r, DETECT_MS));
    const promoteMs = pair.promote();
    promotedAt = performance.now();
    log(`standby promoted in ${promoteMs.toFixed(0)} ms`);
    const answers = await burst;
    await Promise.race([probeLoop, new Promise((r) => setTimeout(r, ANSWER_BOUND_MS))]);
    probing = false;
    await probeLoop;

    // Reconcile settles what was in flight: an x402 authorization may be cashed until it
    // expires, so the books are final once that is past and reconcile has run again.
    const store = {
      name: 'failover',
      dbUrl: pair.multiHostUrl,
      schema: SCHEMA,
      gateways: () => gateways.map((g) => g.url),
      ownerKey,
      sessionIds: () => [...sessions, probeSession].map((s) => s.sessionId),
    };
    const settleBy = Date.now() + X402_VALID_S * 1000 + X402_MARGIN_MS + STALE_MS + 20_000;
    let final: { ok: boolean; invariants?: Record<string, { ok: boolean; breaches: string[] }>; error?: string };
    for (;;) {
      final = await books
        .readStore(store)
        .then((s: unknown) =>
          books.checkBooks({ stores: [s], xpay, x402: world, final: true, holdMarginMs: X402_MARGIN_MS + STALE_MS }),
        )
        .catch((e: Error) => ({ ok: false, error: e.message }));
      if (final.ok || Date.now() > settleBy) break;
      await new Promise((r) => setTimeout(r, 500));
    }

    // Every receipt a client was given is on the promoted standby, read there directly.
    const given = [...answers, ...probe].filter((a) => a.receiptId).map((a) => a.receiptId!);
    const c = new pg.Client({ connectionString: pair.standbyUrl, options: `-c search_path=${SCHEMA}` });
    await c.connect();
    let onStandby: number;
    let reconciled: { committed: number; released: number };
    try {
      onStandby = (await c.query('SELECT count(*)::int AS n FROM gw_receipts WHERE id = ANY($1)', [given])).rows[0].n;
      reconciled = { committed: 0, released: 0 };
    } finally {
      await c.end();
    }
    for (const g of gateways) {
      const text = await (await fetch(`${g.url}/metrics`)).text();
      for (const outcome of ['committed', 'released'] as const)
        reconciled[outcome] += Number(
          text.match(new RegExp(`^ctl_gateway_reconciled_payments_total\\{outcome="${outcome}"\\} (\\d+)`, 'm'))?.[1] ??
            0,
        );
    }

    const all = [...answers, ...probe];
    const byStatus: Record<string, number> = {};
    for (const a of all) {
      const k = a.code ? `${a.status} ${a.code}` : String(a.status);
      byStatus[k] = (byStatus[k] ?? 0) + 1;
    }
    const lastOkBefore = Math.max(
      0,
      ...all.filter((a) => a.status === 200 && a.endedAt <= killedAt).map((a) => a.endedAt),
    );
    const firstOkAfter = Math.min(
      ...all.filter((a) => a.status === 200 && a.startedAt > killedAt).map((a) => a.endedAt),
    );
    const figures = {
      run,
      promoteMs: Math.round(promoteMs),
      withoutPaymentsMs: Math.round(firstOkAfter - lastOkBefore),
      killToFirstPaymentMs: Math.round(firstOkAfter - killedAt),
      promotedToFirstPaymentMs: Math.round(firstOkAfter - promotedAt),
      // When the last 503 was answered: how long clients heard "the database is unavailable".
      last503AfterKillMs: Math.round(
        Math.max(0, ...all.filter((a) => a.status === 503).map((a) => a.endedAt - killedAt)),
      ),
      answers: all.length,
      byStatus,
      answered503: all.filter((a) => a.status === 503).length,
      // What the 503s and any other refusal said, once each.
      messages: [...new Set(all.filter((a) => a.status !== 200 && a.status !== 402).map((a) => a.message))],
      slowestMs: Math.round(Math.max(...all.map((a) => a.ms))),
      receiptsGiven: given.length,
      receiptsLost: given.length - onStandby,
      paidTwice: final.invariants?.paidOnce?.breaches.length ?? 'unknown',
      reconciled,
      died,
    };
    log(JSON.stringify(figures));

    return { figures, final, all };
  } finally {
    stopping = true;
    for (const g of gateways) await procs.stop(g.child);
    await xpay.close();
    await world.close();
    pair.close();
  }
}

const missing = replicatedPairMissing();
const runs = Number(process.env.CTL_TEST_FAILOVER_RUNS ?? 1);

test(
  `${runs} failover(s) of a synchronous standby under 200 payments: every answer 2xx, 402/403 or ` +
    '503 in bound, no gateway dies, nothing paid twice, no receipt lost, the books balance',
  async () => {
    if (missing) {
      console.log(`SKIPPED failover campaign: ${missing}`);
      return;
    }
    assert.ok(Number.isSafeInteger(runs) && runs >= 1, `CTL_TEST_FAILOVER_RUNS: expected a count, got ${runs}`);
    for (let run = 1; run <= runs; run++) {
      const { figures, final, all } = await oneRun(run);
      const bad = all.filter((a) => !allowed(a.status));
      assert.equal(bad.slice(0, 5), [], `run ${run}: answers outside 2xx, 402/403, 503`);
      assert.equal(figures.died, [], `run ${run}: a gateway died`);
      assert.ok(final.ok, `run ${run}: the books: ${JSON.stringify(final.invariants ?? final.error)}`);
      assert.is(figures.receiptsLost, 0, `run ${run}: receipts given to clients missing on the new primary`);
      // The run did what it claims: payments before and after the failover, and some refused by the database loss.
      assert.ok(all.filter((a) => a.status === 200).length > KILL_AFTER / 2, `run ${run}: payments were made`);
      assert.ok(Number.isFinite(figures.withoutPaymentsMs), `run ${run}: a payment succeeded after the promotion`);
      assert.ok(figures.answered503 > 0, `run ${run}: the kill landed while payments were in flight`);
    }
  },
);

test.run();
