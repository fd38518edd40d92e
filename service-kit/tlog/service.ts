/**
 * One service's log, witness and alerts, wired the same way in the gateway and the authority:
 * `prepareServiceLog` (server.ts, after the migrations) reads or makes the keys;
 * `createServiceLog` (createApp) builds the log, its witness, its routes and its metrics without
 * touching the database or starting anything; `start()` (server.ts only) runs the timer that
 * integrates pending entries and signs a checkpoint every `checkpointMs` (≤ 1 s) while they arrive.
 *
 * A split view this service witnesses is an event (`onSplitView`: the service's audit entry), a
 * webhook (`log.split_view`, through a webhook outbox of its own, to the operator's alert URL),
 * a metric (`<prefix>log_split_views_total`) and a flag (`/log/status` → `splitView: true`).
 */
import type Router from '@koa/router';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { SqlDatabase } from '../database.js';
import type { Migration } from '../migrate.js';
import type { SecretSealer } from '../secrets/index.js';
import type { Logger } from '../logger.js';
import {
  createWebhookOutbox,
  dispatchLogMigration,
  webhookOutboxMigration,
  type WebhookOutbox,
} from '../webhook-outbox.js';
import { transparencyLogMigrations } from './schema.js';
import { openLogKey } from './key.js';
import { COSIGNATURE_V1, readVerifierKey, type NoteSigner } from './note-key.js';
import { createTransparencyLog, type TransparencyLog } from './log.js';
import { createWitness, witnessRound, type SplitView, type Witness, type WitnessConfig } from './witness.js';
import { logRoutes } from './routes.js';
import { logCheckpointFile, witnessHighWater } from './high-water.js';
import type { HighWaterSource } from '../rollback-guard.js';

export interface ServiceLogConfig {
  /** Table prefix, e.g. `gw_log`. */
  prefix: string;
  /** Origin of a new log (the note key's name), e.g. `gateway.example.com/ctl-gateway-log`. */
  origin: string;
  /** The log's note key (`PRIVATE+KEY+…`); default made once and stored. */
  skey?: string;
  /** Witnesses this log asks to cosign each checkpoint. */
  witnesses?: WitnessConfig[];
  /** The vkeys of the logs this service witnesses (none: no witness endpoint). */
  witnessOf?: string[];
  /** This service's cosigning key (`PRIVATE+KEY+…`, type 0x04); default made once and stored. */
  witnessSkey?: string;
  /** The witness name for a key made here, e.g. `authority.example.com/ctl-witness`. */
  witnessName?: string;
  /** Where split views are sent (Standard Webhooks, signed with `secret`). */
  alert?: { url: string; secret: string };
  /** How often the timer integrates and signs (default and at most 1000 ms). */
  checkpointMs?: number;
}

export interface ServiceLogParts {
  config: ServiceLogConfig;
  signer: NoteSigner;
  witnessSigner?: NoteSigner;
}

/** The log's tables and its alerts' outbox; add to the service's migrations. */
export function serviceLogMigrations(prefix: string): Migration[] {
  return [
    ...transparencyLogMigrations(prefix),
    dispatchLogMigration(`${prefix}_alerts`),
    webhookOutboxMigration(`${prefix}_alerts`),
  ];
}

export async function prepareServiceLog(
  db: SqlDatabase,
  config: ServiceLogConfig,
  sealer?: SecretSealer,
): Promise<ServiceLogParts> {
  const signer = await openLogKey(db, config.prefix, { origin: config.origin, skey: config.skey, sealer });
  for (const w of config.witnesses ?? []) {
    try {
      readVerifierKey(w.vkey, COSIGNATURE_V1);
    } catch (e) {
      throw new RangeError(`witness ${w.url}: ${(e as Error).message}`);
    }
  }
  const witnessSigner = config.witnessOf?.length
    ? await openLogKey(db, config.prefix, {
        origin: config.witnessName ?? `${config.origin}-witness`,
        skey: config.witnessSkey,
        sealer,
        type: COSIGNATURE_V1,
      })
    : undefined;
  return { config, signer, witnessSigner };
}

export interface ServiceLog {
  log: TransparencyLog;
  witness?: Witness;
  /** Mounts /log/… (and /witness/add-checkpoint when witnessing). */
  routes(router: Router, refParams?: Record<string, string>): void;
  /** The integrate-and-sign timer (server.ts only); `close()` stops it. */
  start(): void;
  close(): Promise<void>;
  /**
   * Where the log's newest checkpoint is remembered outside the database (high-water.ts): the
   * file `logFile` (kept current once the start-time check passed) and each witness this log asks.
   */
  highWaterSources(logFile: string | undefined): HighWaterSource[];
}

export function createServiceLog(
  db: SqlDatabase,
  parts: ServiceLogParts,
  o: {
    registry: Registry;
    metricPrefix: string;
    logger: Logger;
    now?: () => number;
    fetch?: typeof fetch;
    /** Records a split view in the service's audit trail. */
    onSplitView?: (s: SplitView) => Promise<void> | void;
  },
): ServiceLog {
  const { config } = parts;
  const p = config.prefix;
  const splitViews = new Counter({
    name: `${o.metricPrefix}log_split_views_total`,
    help: 'Split views detected: two checkpoints of one size with different roots, both signed by the log',
    labelNames: ['origin'] as const,
    registers: [o.registry],
  });
  const witnessFailures = new Counter({
    name: `${o.metricPrefix}log_witness_failures_total`,
    help: 'Checkpoints a witness did not cosign, by witness',
    labelNames: ['witness'] as const,
    registers: [o.registry],
  });
  // What each witness last did for this log, for /log/status (the console).
  const witnessState = new Map<string, { cosignedSize: number | null; lastError: string | null; at: string }>();
  for (const w of config.witnesses ?? [])
    witnessState.set(readVerifierKey(w.vkey, COSIGNATURE_V1).name, { cosignedSize: null, lastError: null, at: '' });
  const log = createTransparencyLog({
    db,
    prefix: p,
    signer: parts.signer,
    now: o.now,
    witnesses: config.witnesses?.length
      ? witnessRound({
          db,
          prefix: p,
          logVkey: parts.signer.vkey,
          witnesses: config.witnesses,
          fetch: o.fetch,
          onCosigned: (witness, size) =>
            witnessState.set(witness, { cosignedSize: size, lastError: null, at: new Date().toISOString() }),
          onError: (witness, message) => {
            const was = witnessState.get(witness);
            witnessState.set(witness, {
              cosignedSize: was?.cosignedSize ?? null,
              lastError: message,
              at: new Date().toISOString(),
            });
            witnessFailures.inc({ witness });
            o.logger.warn({ witness, message }, 'log: witness did not cosign');
          },
        })
      : undefined,
  });
  new Gauge({
    name: `${o.metricPrefix}log_size`,
    help: 'Entries integrated into the transparency log',
    registers: [o.registry],
    // A scrape while the database is unreachable still answers, without this sample.
    async collect() {
      const t = await log.tree().catch(() => undefined);
      if (t) this.set(t.size);
    },
  });
  new Gauge({
    name: `${o.metricPrefix}log_checkpoint_size`,
    help: 'Tree size of the checkpoint served at /log/checkpoint',
    registers: [o.registry],
    async collect() {
      const c = await log.checkpoint().catch(() => null);
      if (c !== null) this.set(c?.size ?? 0);
    },
  });
  const alert = config.alert;
  const alerts: WebhookOutbox | undefined = alert
    ? createWebhookOutbox({
        db,
        table: `${p}_alerts`,
        resolve: (target) => (target === 'operator' ? { secret: alert.secret } : undefined),
        fetch: o.fetch,
        onError: (e) => o.logger.warn({ err: e }, 'log alert delivery failed'),
      })
    : undefined;
  const witness =
    parts.witnessSigner &&
    createWitness({
      db,
      prefix: p,
      signer: parts.witnessSigner,
      logs: config.witnessOf ?? [],
      now: o.now,
      record: alerts
        ? async (q, s) => {
            await alerts.enqueue(q, { type: 'log.split_view', data: { ...s, at: new Date(s.at).toISOString() } }, [
              { url: alert!.url, target: 'operator' },
            ]);
          }
        : undefined,
      onSplitView: (s) => {
        splitViews.inc({ origin: s.origin });
        o.logger.error({ origin: s.origin, size: s.size }, 'log: split view detected (two roots for one size)');
        alerts?.kick();
        Promise.resolve(o.onSplitView?.(s)).catch((e) =>
          o.logger.error({ err: e }, 'log: recording a split view failed'),
        );
      },
    });
  let timer: ReturnType<typeof setInterval> | undefined;
  let closed = false;
  const every = Math.min(config.checkpointMs ?? 1000, 1000);
  return {
    log,
    witness,
    routes(router, refParams) {
      logRoutes(router, {
        log,
        witness,
        refParams,
        witnesses: () => [...witnessState].map(([name, w]) => ({ name, ...w, at: w.at || null })),
        witnessKeys: config.witnesses?.map((w) => w.vkey),
      });
    },
    start() {
      if (timer || closed) return;
      alerts?.start();
      const tick = () =>
        log.publish().catch((e) => o.logger.error({ err: e }, 'log: integrating or signing a checkpoint failed'));
      void tick();
      timer = setInterval(tick, every);
      timer.unref?.();
    },
    async close() {
      closed = true;
      clearInterval(timer);
      await log.close();
      await alerts?.close();
    },
    highWaterSources(logFile) {
      const warn = (message: string) => o.logger.warn({ origin: log.origin }, message);
      return [
        ...(logFile ? [logCheckpointFile(log, logFile)] : []),
        ...(config.witnesses ?? []).map((w) => witnessHighWater(log, w, { fetch: o.fetch, warn })),
      ];
    },
  };
}
