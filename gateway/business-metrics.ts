/**
 * The gateway's business metrics, on the app's own prom-client registry (never the global one:
 * several apps share a test process). Labels take closed sets only: PROTOCOL.md §9 codes, rail
 * names, session states, delivery outcomes; never an id, host or URL.
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { DeliveryOutcome, SqlDatabase } from '../service-kit/index.js';
import type { SessionState } from './sessions/store.js';

const SESSION_STATES: readonly SessionState[] = ['active', 'paused', 'revoked', 'expired'];

export interface GatewayMetrics {
  paid(ms: number, rail: string): void;
  refused(code: string, rail: string): void;
  delivery(outcome: DeliveryOutcome): void;
  reconciled(settled: { committed: number; released: number }): void;
}

/** @example const m = gatewayMetrics(metrics.registry, db); payments({ onPaid: (ms, rail) => m.paid(ms, rail) }) */
export function gatewayMetrics(registry: Registry, db: SqlDatabase): GatewayMetrics {
  const registers = [registry];
  const payments = new Counter({
    name: 'ctl_gateway_payments_total',
    help: 'Payments made and committed, by rail',
    labelNames: ['rail'] as const,
    registers,
  });
  const refusals = new Counter({
    name: 'ctl_gateway_refusals_total',
    help: 'Payments refused, by PROTOCOL.md §9 code and rail',
    labelNames: ['code', 'rail'] as const,
    registers,
  });
  const latency = new Histogram({
    // No labels: the rail split is in payments_total, and a labelled histogram multiplies series.
    name: 'ctl_gateway_payment_duration_seconds',
    help: 'From the merchant 402 to the committed receipt',
    registers,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
  });
  const deliveries = new Counter({
    name: 'ctl_gateway_webhook_deliveries_total',
    help: 'Webhook delivery attempts, by outcome (delivered, retry, dead_letter)',
    labelNames: ['outcome'] as const,
    registers,
  });
  const passes = new Counter({
    name: 'ctl_gateway_reconcile_passes_total',
    help: 'Reconcile passes over open payments',
    registers,
  });
  const settled = new Counter({
    name: 'ctl_gateway_reconciled_payments_total',
    help: 'Open payments settled by reconcile, by outcome (committed, released)',
    labelNames: ['outcome'] as const,
    registers,
  });
  for (const outcome of ['delivered', 'retry', 'dead_letter']) deliveries.inc({ outcome }, 0);
  for (const outcome of ['committed', 'released']) settled.inc({ outcome }, 0);
  // Read from the database at scrape time: every instance sharing it reports the same numbers.
  new Gauge({
    name: 'ctl_gateway_sessions',
    help: 'Sessions by state (active, paused, revoked, expired), read from the database at scrape',
    labelNames: ['state'] as const,
    registers,
    async collect() {
      let rows: { state: string; n: number | string }[];
      try {
        rows = await db.all(`SELECT state, COUNT(*) AS n FROM gw_sessions GROUP BY state`);
      } catch {
        // The database is down: no samples (never stale ones), and the rest of the scrape still answers.
        this.reset();
        return;
      }
      const counts = new Map(rows.map((r) => [r.state, Number(r.n)]));
      for (const state of SESSION_STATES) this.set({ state }, counts.get(state) ?? 0);
    },
  });
  return {
    paid(ms, rail) {
      payments.inc({ rail });
      latency.observe(ms / 1000);
    },
    refused: (code, rail) => refusals.inc({ code, rail }),
    delivery: (outcome) => deliveries.inc({ outcome }),
    reconciled(r) {
      passes.inc();
      settled.inc({ outcome: 'committed' }, r.committed);
      settled.inc({ outcome: 'released' }, r.released);
    },
  };
}
