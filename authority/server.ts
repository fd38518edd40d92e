/**
 * The authority's server entry: configuration → store → keys → webhooks and anchors → app →
 * listen. `createAuthority` wires without listening (two instances on one database in tests).
 */
import type Koa from 'koa';
import {
  createLogger,
  formatRateLimit,
  listen,
  webhookRetryFromEnv,
  type Listening,
  type Logger,
  type WebhookOutbox,
  type WebhookRetrySettings,
} from '../service-kit/index.js';
import {
  auditLogChainReader,
  guardRollback,
  highWaterFileOf,
  rollbackOptionsFromEnv,
  type RollbackOptions,
} from '../service-kit/rollback-guard.js';
import { createAuthorityApp } from './app.js';
import {
  auditHeadSource,
  checkpointSource,
  openServiceAnchoring,
  type ChainEvent,
  type ChainOutbox,
  type ChainOutboxOptions,
  type Ledger,
} from '../service-kit/anchor/index.js';
import { readAuthorityConfig, type AuthorityConfig } from './config.js';
import { GRANT_KEY_RENEW_MS, createKeyRing, type KeyRing } from './keys.js';
import { openAuthorityKek, openAuthoritySigners } from './signers.js';
import { openAuthorityStore } from './store/open.js';
import { createTrustRoot, type TrustRoot } from './trust-root.js';
import type { AuthorityStore } from './store/types.js';
import { createMetrics } from '../service-kit/index.js';
import { hostname } from 'node:os';
import {
  createServiceLog,
  logCheckpointFileOf,
  defaultLogOrigin,
  prepareServiceLog,
  serviceLogConfigFromEnv,
  type ServiceLog,
} from '../service-kit/tlog/index.js';

export interface Authority {
  app: Koa;
  store: AuthorityStore;
  keys: KeyRing;
  trustRoot: TrustRoot;
  config: AuthorityConfig;
  logger: Logger;
  /** The audit webhooks' outbox (drained by every instance on the database). */
  outbox: WebhookOutbox;
  /** The transparency log of grants, revocations and bundles (/log/); undefined with CTL_AUTHORITY_LOG=0. */
  log?: ServiceLog;
  /** Waits until no webhook delivery is pending (each delivered or dead-lettered) and anchors are written (tests). */
  /** Anchors of the log's checkpoint (the audit head with the log off), revocation tokens (service-kit/anchor/). */
  chain: ChainOutbox;
  settle(): Promise<void>;
  close(): Promise<void>;
}

export interface CreateAuthorityOptions {
  logger?: Logger;
  logRequests?: boolean;
  now?: () => number;
  /** Ledgers in addition to those the environment configures (tests). */
  ledgers?: Ledger[];
  /** Over CTL_ANCHOR_*_MS (tests). */
  anchorTiming?: Partial<
    Pick<ChainOutboxOptions, 'anchorIntervalMs' | 'pollMs' | 'baseDelayMs' | 'maxDelayMs' | 'alertAfterMs'>
  >;
  /** Told each anchoring event (tests). */
  onChainEvent?: (e: ChainEvent) => void;
  /** PostgreSQL schema (tests). */
  schema?: string;
  fetch?: typeof fetch;
  /** Over `CTL_WEBHOOK_*` (service-kit webhookRetryFromEnv). */
  webhookRetry?: WebhookRetrySettings;
  env?: Record<string, string | undefined>;
  /** The rollback check (service-kit/rollback-guard.ts); default: CTL_AUTHORITY_HIGH_WATER_FILE, _ACCEPT_ROLLBACK. */
  rollback?: RollbackOptions;
}

/** @example const a = await createAuthority(readAuthorityConfig()); listen(a.app, { port: a.config.port }) */
export async function createAuthority(
  config: AuthorityConfig,
  options: CreateAuthorityOptions = {},
): Promise<Authority> {
  const logger = options.logger ?? createLogger({ name: 'ctl-authority', level: config.logLevel });
  const now = options.now ?? Date.now;
  if (config.defaulted.length) logger.warn({ defaulted: config.defaulted }, 'development defaults in use');
  // Signers first: an HSM that cannot be reached stops the start before anything is opened.
  const signers = await openAuthoritySigners(config);
  let store: AuthorityStore;
  let kek: Awaited<ReturnType<typeof openAuthorityKek>> | undefined;
  try {
    kek = await openAuthorityKek(config);
    store = await openAuthorityStore(config.databaseUrl, { schema: options.schema });
  } catch (e) {
    await signers.close();
    await kek?.close();
    throw e;
  }
  const sealer = kek.sealer;
  const closeKek = kek.close;
  if (kek.source === 'dev-file') {
    logger.warn(
      { kek: kek.devFile },
      'no CTL_AUTHORITY_KEK: stored private keys are sealed under a development KEK kept ' +
        'in a 0600 file beside the database (set CTL_AUTHORITY_KEK or CTL_AUTHORITY_KEK_PKCS11_URI ' +
        'in production)',
    );
  }
  let lease: ReturnType<typeof setInterval> | undefined;
  let highWater: Awaited<ReturnType<typeof guardRollback>>;
  let log: ServiceLog | undefined;
  try {
    const keys = createKeyRing({
      store,
      logger,
      now,
      grantSigner: signers.grant,
      grantSigningKeyId: config.grantSigningKeyId,
      rootSigner: signers.root,
      sealer,
      // Once the root is rotated its private keys stay offline: the authority signs bundles with a bundle key.
      rootPrivateKeyOptional: (await store.listRootStatements()).length > 0,
    });
    await keys.init();
    const trustRoot = createTrustRoot({
      store,
      keys,
      logger,
      now,
      ...(signers.bundle
        ? { bundleSigningKey: signers.bundle.signer, bundleKeyVariable: signers.bundle.variable }
        : { bundleSigningKey: config.bundleSigningKeyPem }),
    });
    await trustRoot.init();
    const metrics = createMetrics({ prefix: 'ctl_authority_' });
    log = await openAuthorityLog(store, sealer, metrics.registry, logger, options, now);
    // Before serving: a database restored from an older backup would undo revocations and keys. The
    // log's newest checkpoint is a mark too: in a file beside the audit chain's, and at each witness.
    const rollback = options.rollback ?? rollbackOptionsFromEnv(options.env ?? process.env, 'CTL_AUTHORITY');
    const markFile = highWaterFileOf(store, rollback);
    const logMarks = log?.highWaterSources(markFile && logCheckpointFileOf(markFile)) ?? [];
    highWater = await guardRollback(
      store,
      auditLogChainReader(store.audit),
      { ...rollback, sources: [...(rollback.sources ?? []), ...logMarks] },
      logger,
    );
    // Keeps this instance's grant key from the environment published while it runs (keys.ts).
    let renewing: Promise<void> = Promise.resolve();
    lease = setInterval(() => {
      renewing = keys.renewLease().catch((e) => logger.warn({ err: e }, 'grant key lease not renewed'));
    }, GRANT_KEY_RENEW_MS);
    lease.unref();
    // Durable deliveries: written with each audit entry, drained by every instance (also rows
    // left pending by an instance that stopped). A row whose URL is no longer configured is
    // dead-lettered rather than sent without a secret.
    const endpoints = new Set(config.webhookUrls);
    const outbox = store.webhookOutbox({
      resolve: (url) => (endpoints.has(url) && config.webhookSecret ? { secret: config.webhookSecret } : undefined),
      fetch: options.fetch,
      now,
      ...webhookRetryFromEnv(options.env ?? process.env),
      ...options.webhookRetry,
      onError: (e) => logger.error({ err: e }, 'webhook delivery failed'),
    });
    outbox.start();
    const webhooks = { outbox, endpoints: config.webhookUrls.map((url) => ({ url, target: url })) };
    // What is anchored: the log's signed checkpoint; with the log off, the audit chain's head under
    // the issuer's name, the anchor records saying so (service-kit/anchor/service.ts).
    const anchorSources = [
      log ? checkpointSource(log.log) : auditHeadSource(store.audit, `${config.issuer}/ctl-authority-audit`),
    ];
    const { outbox: chain } = await openServiceAnchoring({
      db: store.db,
      table: 'chain_outbox',
      sources: anchorSources,
      settings: config.anchoring,
      env: options.env ?? process.env,
      revocations: true,
      ledgers: options.ledgers,
      logger,
      metrics: { registry: metrics.registry, prefix: 'ctl_authority_' },
      now,
      fetch: options.fetch,
      timing: options.anchorTiming,
      onEvent: options.onChainEvent,
    });
    chain.start();
    const app = createAuthorityApp({
      log,
      metrics,
      store,
      keys,
      trustRoot,
      issuer: config.issuer,
      revocationBaseUrl: config.revocationBaseUrl,
      adminApiKey: config.adminApiKey,
      logger,
      logRequests: options.logRequests,
      now,
      webhooks,
      chain,
      anchorSources,
      rateLimits: config.rateLimits,
    });
    // Integrates pending entries and signs a checkpoint every second (service-kit/tlog/service.ts).
    log?.start();
    const settle = () => outbox.idle();
    return {
      app,
      store,
      keys,
      trustRoot,
      config,
      logger,
      outbox,
      log,
      chain,
      settle,
      async close() {
        clearInterval(lease);
        await renewing;
        await log?.close();
        await outbox.close();
        await chain.close();
        await highWater?.close();
        await store.close();
        await signers.close();
        await closeKek();
      },
    };
  } catch (e) {
    clearInterval(lease);
    await log?.close();
    await highWater?.close();
    await store.close();
    await signers.close();
    await closeKek();
    throw e;
  }
}

/** Creates and listens; logs where. @example const { url, close } = await startAuthority(readAuthorityConfig()) */
export async function startAuthority(
  config: AuthorityConfig = readAuthorityConfig(),
  options: CreateAuthorityOptions = {},
): Promise<Authority & { listening: Listening; url: string }> {
  const authority = await createAuthority(config, options);
  let listening: Listening;
  try {
    listening = await listen(authority.app, { port: config.port, host: config.host });
  } catch (e) {
    await authority.close();
    throw e;
  }
  authority.logger.info(
    {
      url: listening.url,
      database: authority.store.description,
      issuer: config.issuer,
      rateLimitKey: formatRateLimit(config.rateLimits.key),
      rateLimitAddress: formatRateLimit(config.rateLimits.address),
    },
    'policy authority listening',
  );
  return {
    ...authority,
    listening,
    url: listening.url,
    async close() {
      await listening.close();
      await authority.close();
    },
  };
}

/**
 * The authority's transparency log (`CTL_AUTHORITY_LOG_*`, service-kit/tlog/config.ts), its keys
 * read or made once; a split view it witnesses is an audit entry (and its webhook) as well.
 */
async function openAuthorityLog(
  store: AuthorityStore,
  sealer: Parameters<typeof prepareServiceLog>[2],
  registry: ReturnType<typeof createMetrics>['registry'],
  logger: Logger,
  options: CreateAuthorityOptions,
  now: () => number,
): Promise<ServiceLog | undefined> {
  const env = options.env ?? process.env;
  const config = serviceLogConfigFromEnv(env, 'CTL_AUTHORITY', {
    defaultOrigin: defaultLogOrigin(env.CTL_REVOCATION_BASE_URL, hostname(), 'ctl-authority-log'),
  });
  if (config === false) return undefined;
  const parts = await prepareServiceLog(store.db, { ...config, prefix: 'au_log' }, sealer);
  return createServiceLog(store.db, parts, {
    registry,
    metricPrefix: 'ctl_authority_',
    logger,
    now,
    fetch: options.fetch,
    onSplitView: async (s) => {
      await store.audit.append({
        actor: 'system',
        action: 'log.split_view',
        subject: s.origin,
        data: s,
        at: new Date(now()).toISOString(),
      });
    },
  });
}
