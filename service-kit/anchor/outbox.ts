/**
 * The chain outbox (spec §4.3 "on-chain anchoring … fire-and-forget, does not affect issuance
 * latency"; §6 "writes audit records asynchronously"): what the service writes on ledgers
 * (anchors of its logs' heads, revocation tokens) is queued in its database and written by a
 * timer, never by a request. A revocation's token is queued in the revocation's transaction
 * (`enqueue`), so a revocation that commits is minted; a log's head is read by the timer every
 * `anchorIntervalMs` and queued when it grew, the newest head replacing one not yet signed.
 *
 * Per ledger, one instance at a time (a lease in the database) works the rows in order:
 * - a `pending` row is signed and recorded (`sent`, its txid and raw transaction) before it is
 *   broadcast, so a crash or a failed broadcast sends the same transaction again, never another;
 *   no new row is signed while an earlier transaction is not known to the node (nonce order);
 * - a `sent` row is followed until it is `confirmations` deep (`confirmed`); one the node lost is
 *   broadcast again, one that can never be mined (its nonce or coins were used) is signed anew;
 * - failures are retried with exponential backoff (`baseDelayMs`·2ⁿ up to `maxDelayMs`, plus up
 *   to 25 % jitter) for as long as it takes: across restarts (the rows are in the database) and
 *   a node down for hours. A row unconfirmed for `alertAfterMs` is reported once (`*.stalled`).
 *
 * Each submission, confirmation and stall is an event (`onEvent`: the services log it) and a
 * metric (`<prefix>chain_*`, `<prefix>anchor_*`).
 */
import { randomBytes } from 'node:crypto';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { SqlDatabase, SqlExecutor } from '../database.js';
import type { AnchorHead, HeadSource } from './head.js';
import { TxRejected, type AnchorJob, type ChainJob, type Ledger } from './ledger.js';
import { createChainOutboxStore, toRecord, type ChainJobRecord, type JobRow } from './store.js';

/**
 * A log whose head is anchored: a transparency log's signed checkpoint (service.ts
 * `checkpointSource`), or the audit chain's head when the log is off (`auditHeadSource`).
 */
export interface AnchorSource {
  readonly origin: string;
  readonly source: HeadSource;
  /** The anchor of the head now; undefined while the log is empty. */
  read(): Promise<AnchorJob | undefined>;
}

export type ChainEventType =
  | 'anchor.submitted'
  | 'anchor.confirmed'
  | 'anchor.stalled'
  | 'revocation.submitted'
  | 'revocation.confirmed'
  | 'revocation.stalled';

export interface ChainEvent {
  type: ChainEventType;
  chain: string;
  record: ChainJobRecord;
}

export interface ChainOutboxOptions {
  db: SqlDatabase;
  table?: string;
  ledgers: Ledger[];
  sources?: AnchorSource[];
  /** How often the heads are read and queued when they grew (default 60 000 ms). */
  anchorIntervalMs?: number;
  /** How often a sent transaction is looked at until it is deep enough (default 5000 ms). */
  pollMs?: number;
  /** Delay before the second attempt, doubling (default 5000 ms). */
  baseDelayMs?: number;
  /** Longest delay between attempts (default 300 000 ms). */
  maxDelayMs?: number;
  /** A job unconfirmed this long is reported stalled, once (default 1 800 000 ms). */
  alertAfterMs?: number;
  /** A ledger is this instance's for this long after each pass (default 120 000 ms). */
  leaseMs?: number;
  /** How often the timer runs a pass (default 1000 ms). */
  tickMs?: number;
  now?: () => number;
  onEvent?: (e: ChainEvent) => void;
  onError?: (e: unknown, chain?: string) => void;
  /** Registers the metrics on `registry`, names prefixed (`ctl_authority_`). */
  metrics?: { registry: Registry; prefix: string };
}

export interface ChainOutbox {
  /** In the revocation's transaction: a token to mint on each ledger that carries them. Call `kick()` after commit. */
  enqueue(q: SqlExecutor, job: Extract<ChainJob, { kind: 'revocation' }>): Promise<void>;
  /** Whether any ledger carries `kind`. */
  carries(kind: ChainJob['kind']): boolean;
  start(): void;
  /** A pass soon. */
  kick(): void;
  /**
   * One pass over every ledger; the heads are read when `anchorIntervalMs` has passed, or when
   * `readHeads` asks. The timer calls it, tests too (with their clock).
   */
  runOnce(options?: { readHeads?: boolean }): Promise<void>;
  list(options?: Parameters<ReturnType<typeof createChainOutboxStore>['list']>[0]): Promise<ChainJobRecord[]>;
  close(): Promise<void>;
  readonly ledgers: readonly Ledger[];
}

function outboxMetrics(m: ChainOutboxOptions['metrics']) {
  if (!m) return undefined;
  const registers = [m.registry];
  const labels = ['chain', 'kind'] as const;
  return {
    submitted: new Counter({
      name: `${m.prefix}chain_jobs_submitted_total`,
      help: 'Ledger transactions broadcast (anchors, revocation tokens)',
      labelNames: labels,
      registers,
    }),
    confirmed: new Counter({
      name: `${m.prefix}chain_jobs_confirmed_total`,
      help: 'Ledger jobs confirmed at the required depth',
      labelNames: labels,
      registers,
    }),
    failures: new Counter({
      name: `${m.prefix}chain_job_failures_total`,
      help: 'Failed attempts at a ledger job (retried with backoff)',
      labelNames: labels,
      registers,
    }),
    stalled: new Gauge({
      name: `${m.prefix}chain_jobs_stalled`,
      help: 'Ledger jobs unconfirmed for longer than the alert delay',
      labelNames: ['chain'] as const,
      registers,
    }),
    confirmations: new Gauge({
      name: `${m.prefix}anchor_confirmations`,
      help: 'Confirmations of the newest anchor transaction of a log',
      labelNames: ['chain', 'origin'] as const,
      registers,
    }),
    anchoredSize: new Gauge({
      name: `${m.prefix}anchor_confirmed_size`,
      help: 'Size of the newest confirmed anchor of a log',
      labelNames: ['chain', 'origin'] as const,
      registers,
    }),
  };
}

const message = (e: unknown) => (e instanceof Error ? e.message : String(e)).slice(0, 500);

/** @example const outbox = createChainOutbox({ db, ledgers: [evm], sources: [auditSource] }); outbox.start() */
export function createChainOutbox(options: ChainOutboxOptions): ChainOutbox {
  const store = createChainOutboxStore(options.db, options.table ?? 'chain_outbox');
  const now = options.now ?? Date.now;
  const pollMs = options.pollMs ?? 5000;
  const base = options.baseDelayMs ?? 5000;
  const cap = options.maxDelayMs ?? 300_000;
  const alertAfter = options.alertAfterMs ?? 1_800_000;
  const leaseMs = options.leaseMs ?? 120_000;
  const anchorEvery = options.anchorIntervalMs ?? 60_000;
  const owner = `i_${randomBytes(9).toString('base64url')}`;
  const metrics = outboxMetrics(options.metrics);
  const report = (e: unknown, chain?: string) => options.onError?.(e, chain);
  const emit = (type: ChainEventType, r: JobRow) => options.onEvent?.({ type, chain: r.chain, record: toRecord(r) });
  let nextHeads = 0;
  let closed = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let running: Promise<void> | undefined;
  let again = false;

  const backoff = (attempts: number) => {
    const d = Math.min(cap, base * 2 ** Math.min(attempts - 1, 40));
    return Math.round(d + Math.random() * d * 0.25);
  };

  /** A failed attempt: counted, retried after the backoff. */
  async function failed(L: Ledger, r: JobRow, e: unknown, back?: 'pending') {
    const attempts = Number(r.attempts) + 1;
    const t = now();
    const set: Record<string, unknown> = { attempts, last_error: message(e), next_attempt_ms: t + backoff(attempts) };
    if (back) Object.assign(set, { status: 'pending', txid: null, raw: null, seen: 0 });
    await store.update(r, set, t);
    metrics?.failures.inc({ chain: L.name, kind: r.kind });
    report(e, L.name);
  }

  /** Signs, records, broadcasts. False when the pass must stop here (the ledger failed). */
  async function send(L: Ledger, r: JobRow): Promise<boolean> {
    let tx;
    try {
      tx = await L.prepare(JSON.parse(r.job) as ChainJob);
    } catch (e) {
      await failed(L, r, e);
      return false;
    }
    const t = now();
    if (!(await store.recordSigned(r, tx.txid, tx.raw, t, t + pollMs))) return true; // superseded meanwhile
    const sent: JobRow = { ...r, status: 'sent', txid: tx.txid, raw: tx.raw, sent_ms: t };
    try {
      await L.broadcast(tx);
    } catch (e) {
      await failed(L, sent, e, e instanceof TxRejected ? 'pending' : undefined);
      return false;
    }
    await store.update(sent, { seen: 1, attempts: 0, last_error: null }, now());
    metrics?.submitted.inc({ chain: L.name, kind: r.kind });
    emit(r.kind === 'anchor' ? 'anchor.submitted' : 'revocation.submitted', { ...sent, seen: 1 });
    return true;
  }

  /** Follows a sent transaction. Resolves to whether the node knows it (false: stop signing new ones). */
  async function track(L: Ledger, r: JobRow): Promise<{ ok: boolean; seen: boolean }> {
    const tx = { txid: r.txid!, raw: r.raw! };
    let st;
    try {
      st = await L.status(tx);
    } catch (e) {
      await failed(L, r, e);
      return { ok: false, seen: false };
    }
    const t = now();
    const origin = r.kind === 'anchor' ? r.subject : undefined;
    if (st.state === 'mined') {
      const done = st.confirmations >= L.confirmations;
      const set = {
        seen: 1,
        attempts: 0,
        last_error: null,
        block_number: st.blockNumber,
        block_hash: st.blockHash,
        confirmations: st.confirmations,
        next_attempt_ms: t + pollMs,
        ...(done ? { status: 'confirmed', confirmed_ms: t } : {}),
      };
      if (!(await store.update(r, set, t))) return { ok: true, seen: true };
      if (origin) metrics?.confirmations.set({ chain: L.name, origin }, st.confirmations);
      if (done) {
        metrics?.confirmed.inc({ chain: L.name, kind: r.kind });
        if (origin)
          metrics?.anchoredSize.set({ chain: L.name, origin }, (JSON.parse(r.job) as { head: AnchorHead }).head.size);
        emit(r.kind === 'anchor' ? 'anchor.confirmed' : 'revocation.confirmed', {
          ...r,
          ...set,
          status: 'confirmed',
          confirmed_ms: t,
        } as JobRow);
      }
      return { ok: true, seen: true };
    }
    if (st.state === 'pending') {
      await store.update(
        r,
        { seen: 1, confirmations: 0, block_number: null, block_hash: null, next_attempt_ms: t + pollMs },
        t,
      );
      return { ok: true, seen: true };
    }
    if (st.state === 'dropped') {
      // Never minable again (a reorganisation dropped it and its nonce or coins went elsewhere, or it reverted).
      await failed(L, r, new Error(`transaction ${r.txid} dropped: ${st.reason}`), 'pending');
      return { ok: true, seen: true };
    }
    // Unknown to the node (lost from its pool, or a reorganisation put it back and it was evicted): send it again.
    try {
      await L.broadcast(tx);
    } catch (e) {
      await failed(L, r, e, e instanceof TxRejected ? 'pending' : undefined);
      return { ok: false, seen: false };
    }
    await store.update(
      r,
      { seen: 1, confirmations: 0, block_number: null, block_hash: null, next_attempt_ms: t + pollMs },
      t,
    );
    return { ok: true, seen: true };
  }

  async function passLedger(L: Ledger, readHeads: boolean): Promise<void> {
    // Reads first: a pass with nothing to do writes nothing (no lease renewal, no commit on the
    // service's database), so an idle outbox costs the requests that share the database nothing.
    const heads: AnchorJob[] = [];
    if (readHeads && L.kinds.includes('anchor'))
      for (const s of options.sources ?? []) {
        const job = await s.read();
        if (job && (await store.headIsNew(L.name, job.head))) heads.push(job);
      }
    let rows = await store.work(L.name);
    const t = now();
    const late = rows.filter((r) => Number(r.since_ms) <= t - alertAfter);
    metrics?.stalled.set({ chain: L.name }, late.length);
    const unreported = late.filter((r) => Number(r.alerted) === 0);
    if (heads.length === 0 && unreported.length === 0 && !rows.some((r) => Number(r.next_attempt_ms) <= t)) return;
    if (!(await store.lease(L.name, owner, t, leaseMs))) return;
    for (const r of await store.markStalled(
      unreported.map((r) => r.id),
      t,
    ))
      emit(r.kind === 'anchor' ? 'anchor.stalled' : 'revocation.stalled', r);
    for (const job of heads) await store.queueHead(L.name, job, now());
    if (heads.length) rows = await store.work(L.name);
    let mayPrepare = true;
    for (const r of rows) {
      if (closed) return;
      if (Number(r.next_attempt_ms) > now()) {
        // Waiting: a pending row keeps the rows after it waiting too (order), as does a sent one the node never saw.
        if (r.status === 'pending' || Number(r.seen) === 0) mayPrepare = false;
        continue;
      }
      if (r.status === 'sent') {
        const { ok, seen } = await track(L, r);
        if (!seen) mayPrepare = false;
        if (!ok) break;
      } else if (mayPrepare) {
        if (!(await send(L, r))) break;
      }
    }
  }

  /** A pass asked to read the heads whatever the interval says (honoured by the pass that runs next). */
  let headsWanted = false;
  function runOnce(o: { readHeads?: boolean } = {}): Promise<void> {
    if (o.readHeads) headsWanted = true;
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      try {
        do {
          again = false;
          const readHeads = headsWanted || now() >= nextHeads;
          headsWanted = false;
          if (readHeads) nextHeads = now() + anchorEvery;
          for (const L of options.ledgers) await passLedger(L, readHeads).catch((e) => report(e, L.name));
        } while (again && !closed);
      } finally {
        running = undefined;
      }
    })();
    return running;
  }

  function schedule(ms: number) {
    if (closed || !started) return;
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => {
      timer = undefined;
      runOnce()
        .catch(report)
        .finally(() => schedule(options.tickMs ?? 1000));
    }, ms);
    timer.unref?.();
  }
  let started = false;

  return {
    ledgers: options.ledgers,
    carries: (kind) => options.ledgers.some((L) => L.kinds.includes(kind)),
    async enqueue(q, job) {
      for (const L of options.ledgers)
        if (L.kinds.includes(job.kind)) await store.insertRevocation(q, L.name, job, now());
    },
    start() {
      if (started || closed || options.ledgers.length === 0) return;
      started = true;
      schedule(0);
    },
    kick() {
      schedule(0);
    },
    runOnce,
    list: (o) => store.list(o),
    async close() {
      closed = true;
      if (timer) clearTimeout(timer);
      timer = undefined;
      await running?.catch(() => {});
      await store.release(owner).catch(() => {});
      for (const L of options.ledgers) await L.close?.().catch(() => {});
    },
  };
}
