/**
 * Anchoring as both services wire it: the ledgers their environment configures, the chain
 * outbox on their database, events written to the log, metrics on their registry, and what is
 * anchored: the transparency log's newest signed checkpoint (`checkpointSource`), or, when the
 * service runs with its log turned off, the head of its audit chain (`auditHeadSource`, origin
 * `<host>/ctl-<service>-audit`), said so in each anchor's record (`source`) and in a warning.
 */
import type { Registry } from 'prom-client';
import type { AuditLog } from '../audit-log.js';
import type { SqlDatabase } from '../database.js';
import type { Logger } from '../logger.js';
import type { TransparencyLog } from '../tlog/log.js';
import { anchorSettingsFromEnv, anchoringConfigured, openLedgers, type AnchorSettings } from './config.js';
import { headOfCheckpoint } from './head.js';
import type { Ledger } from './ledger.js';
import {
  createChainOutbox,
  type AnchorSource,
  type ChainEvent,
  type ChainOutbox,
  type ChainOutboxOptions,
} from './outbox.js';

type Env = Record<string, string | undefined>;

/**
 * The head of a hash-chained audit log as an anchor source: size = the last `seq`, root = its hash.
 * @example auditHeadSource(store.audit, 'authority.example.com/ctl-authority-audit')
 */
export function auditHeadSource(audit: Pick<AuditLog, 'head'>, origin: string): AnchorSource {
  return {
    origin,
    source: 'audit-head',
    async read() {
      const h = await audit.head();
      return h ? { kind: 'anchor', head: { origin, size: h.seq, root: h.hash }, source: 'audit-head' } : undefined;
    },
  };
}

/**
 * A transparency log's newest published checkpoint (the one /log/checkpoint serves, its witness
 * round over) as an anchor source: its origin, size and root hash, and the signed note kept with
 * the anchor. The empty tree is not anchored (its root is a constant).
 * @example checkpointSource(serviceLog.log)
 */
export function checkpointSource(log: Pick<TransparencyLog, 'origin' | 'checkpoint'>): AnchorSource {
  return {
    origin: log.origin,
    source: 'checkpoint',
    async read() {
      const c = await log.checkpoint();
      if (!c || c.size === 0) return undefined;
      return { kind: 'anchor', head: headOfCheckpoint(c.note), source: 'checkpoint', checkpoint: c.note };
    },
  };
}

/** `<host of url>/ctl-<service>-audit`: the origin of a service's audit chain. */
export function auditOrigin(url: string, service: 'authority' | 'gateway'): string {
  let host = 'localhost';
  try {
    host = new URL(url).host || host;
  } catch {
    host = url.replace(/^[a-z]+:\/\//, '').split('/')[0] || host;
  }
  return `${host}/ctl-${service}-audit`;
}

export interface ServiceAnchoringOptions {
  /** The service's database and the outbox table on it. */
  db: SqlDatabase;
  table: string;
  sources: AnchorSource[];
  /** The settings read with the service's configuration, or the environment to read them from. */
  settings?: AnchorSettings & { unknown: string[] };
  env: Env;
  /** The authority mints revocation tokens; the gateway does not. */
  revocations?: boolean;
  /** Ledgers besides the environment's (tests). */
  ledgers?: Ledger[];
  logger: Logger;
  metrics?: { registry: Registry; prefix: string };
  now?: () => number;
  fetch?: typeof fetch;
  /** Over the environment's CTL_ANCHOR_* timing (tests). */
  timing?: Partial<
    Pick<ChainOutboxOptions, 'anchorIntervalMs' | 'alertAfterMs' | 'maxDelayMs' | 'pollMs' | 'baseDelayMs' | 'tickMs'>
  >;
  /** Told each event after it is logged (tests). */
  onEvent?: (e: ChainEvent) => void;
}

function logEvent(logger: Logger, e: ChainEvent) {
  const r = e.record;
  const what =
    r.job.kind === 'anchor'
      ? { origin: r.job.head.origin, size: r.job.head.size, root: r.job.head.root, source: r.job.source }
      : { tokenId: r.job.id, expiresAt: r.job.expiresAt };
  const fields = {
    event: e.type,
    chain: e.chain,
    ...what,
    txid: r.txid,
    block: r.blockNumber,
    confirmations: r.confirmations,
  };
  if (e.type.endsWith('.stalled'))
    logger.error(
      { ...fields, since: r.since, attempts: r.attempts, lastError: r.lastError },
      `${e.type}: unconfirmed since ${r.since}`,
    );
  else logger.info(fields, e.type);
}

export interface ServiceChainOutboxOptions extends Pick<
  ServiceAnchoringOptions,
  'db' | 'table' | 'sources' | 'logger' | 'metrics' | 'now' | 'timing' | 'onEvent'
> {
  ledgers: Ledger[];
  settings?: Pick<AnchorSettings, 'timing'>;
}

/**
 * The outbox over opened ledgers, its events logged (a service's createApp: nothing started).
 * @example const chain = createServiceChainOutbox({ db, table: 'gw_chain_outbox', ledgers, sources, logger })
 */
export function createServiceChainOutbox(o: ServiceChainOutboxOptions): ChainOutbox {
  if (o.ledgers.some((L) => L.kinds.includes('anchor')))
    for (const s of o.sources.filter((x) => x.source === 'audit-head'))
      o.logger.warn(
        { origin: s.origin, source: s.source },
        'anchoring the audit chain head: the transparency log is off (each anchor record says source audit-head)',
      );
  const timing = Object.fromEntries(Object.entries(o.settings?.timing ?? {}).filter(([, v]) => v !== undefined));
  return createChainOutbox({
    db: o.db,
    table: o.table,
    ledgers: o.ledgers,
    sources: o.sources,
    ...timing,
    ...o.timing,
    now: o.now,
    metrics: o.metrics,
    onEvent: (e) => {
      logEvent(o.logger, e);
      o.onEvent?.(e);
    },
    onError: (e, chain) =>
      o.logger.warn({ chain, err: (e as Error)?.message ?? String(e) }, 'ledger attempt failed (retried)'),
  });
}

/**
 * The ledgers the settings configure, opened (signers included), with the unknown variables
 * warned about; none when nothing is configured.
 */
export async function openServiceLedgers(o: {
  settings: AnchorSettings & { unknown: string[] };
  env: Env;
  revocations?: boolean;
  logger: Logger;
  fetch?: typeof fetch;
}): Promise<Ledger[]> {
  for (const name of o.settings.unknown)
    o.logger.warn(
      { variable: name },
      `${name}: not an anchoring variable (ledger kinds: EVM, BTC, LOCAL_PATH): ignored`,
    );
  const ledgers = anchoringConfigured(o.settings) ? await openLedgers(o.settings, o) : [];
  if (ledgers.length)
    o.logger.info(
      { ledgers: ledgers.map((l) => ({ chain: l.name, kinds: l.kinds, confirmations: l.confirmations })) },
      'anchoring configured',
    );
  return ledgers;
}

/**
 * Opens the configured ledgers and the outbox (not started: the server starts it). With nothing
 * configured the outbox has no ledger and does nothing.
 * @example const { outbox } = await openServiceAnchoring({ db, table: 'chain_outbox', sources, env, logger })
 */
export async function openServiceAnchoring(
  o: ServiceAnchoringOptions,
): Promise<{ outbox: ChainOutbox; settings: AnchorSettings }> {
  const settings = o.settings ?? anchorSettingsFromEnv(o.env);
  const ledgers = [...(await openServiceLedgers({ ...o, settings })), ...(o.ledgers ?? [])];
  return { outbox: createServiceChainOutbox({ ...o, ledgers, settings }), settings };
}
