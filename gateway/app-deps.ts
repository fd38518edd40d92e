/**
 * What the gateway app is built from: its dependencies (GatewayDeps, from server.ts or a test),
 * the parts server.ts prepares from the database (GatewayParts), and the core every part of the
 * wiring shares (GatewayCore). Apart from app.ts so the wiring modules (app-*.ts) and app.ts
 * import these one way.
 */
import {
  createMetrics,
  silentLogger,
  type Metrics,
  type SqlDatabase,
  type Logger,
  type WebhookRetrySettings,
} from '../service-kit/index.js';
import { createLedgerRail } from './payments/ledger.js';
import type { Rail } from './payments/rail.js';
import type { EvmChainReader } from './payments/evm/chain.js';
import type { X402AssetMap } from './payments/evm/assets.js';
import type { ExternalKey, KeyRing } from './keys/ring.js';
import type { SessionKeys } from './sessions/actor-keys.js';
import type { SecretSealer } from '../service-kit/secrets/index.js';
import type { GatewayEventType } from './sessions/events.js';
import { gatewayMetrics, type GatewayMetrics } from './business-metrics.js';
import type { LookupFn, TargetPolicy } from './net/address-guard.js';
import type { IdempotencyOptions } from './idempotency/service.js';
import type { AnchorSettings, ChainEvent, Ledger, ServiceAnchoringOptions } from '../service-kit/anchor/index.js';
import type { GatewayRateLimits } from '../service-kit/service-limits.js';
import type { ServiceLogConfig, ServiceLogParts } from '../service-kit/tlog/index.js';

export interface GatewayDeps {
  db: SqlDatabase;
  logger?: Logger;
  /** `CTL_GATEWAY_ADMIN_KEY`: bootstraps budget-owner keys (≥ 16 characters). */
  adminKey?: string;
  /** Base URL put in grants and responses; default: the listen address (pinListenUrl), never a request's Host. */
  publicUrl?: string;
  /** Issuer of the internal grants, receipts and bundle; default `ctl-gateway`. */
  issuer?: string;
  /** The forwarder's address guard; private targets refused unless allowed. */
  targets?: TargetPolicy;
  /** DNS for the forwarder (tests). */
  resolve?: LookupFn;
  /**
   * CA certificates (PEM) the forwarder trusts for merchants' TLS instead of Node's bundled roots
   * (a private merchant CA, tests); default Node's roots plus NODE_EXTRA_CA_CERTS.
   */
  upstreamCa?: string[];
  /**
   * Base URLs of the policy authorities whose people's grants may back sessions
   * (CTL_GATEWAY_HUMAN_AUTHORITIES; sessions/human.ts). Reached through the address
   * guard like every outbound request: an authority on a private address needs its host:port in
   * `targets.allowHosts`. Default none: every `humanGrant` is refused `issuer_not_trusted`.
   */
  humanAuthorities?: string[];
  /** Pays merchants; default the ledger rail on this database. */
  rail?: Rail;
  /**
   * The x402 rail: `CTL_X402_ASSETS` (session currency → assets it may pay with; empty:
   * every x402 402 is `asset_not_allowed`), `CTL_X402_MAX_TIMEOUT_SECONDS` (600) and
   * `CTL_GATEWAY_EVM_PRIVATE_KEY` (default: made on first start and kept in the database).
   */
  x402?: {
    assets?: X402AssetMap;
    maxTimeoutSeconds?: number;
    privateKey?: `0x${string}`;
    chain?: (network: string) => EvmChainReader | undefined;
    /**
     * `CTL_X402_MAX_HOLD_SECONDS` (600): the longest one payment may hold its amount of a session's budget
     * (payments/evm/assets.ts holdCap).
     */
    maxHoldSeconds?: number;
    /**
     * Clock skew allowed past an authorization's `validBefore` before the chain is asked (default 60 s;
     * payments/evm/rail.ts).
     */
    expiryMarginMs?: number;
  };
  now?: () => number;
  forwardTimeoutMs?: number;
  maxBodyBytes?: number;
  maxResponseBytes?: number;
  /** Payments open longer than this are settled by reconcile (default 120 s: longer than any forward). */
  reconcileStaleMs?: number;
  /** How often server.ts's reconcile pass runs (default 30 s); also part of how long an x402 hold may last. */
  reconcileIntervalMs?: number;
  /** Upper bound on the expiry sweep's sleep (server.ts; default 30 s; a new session reschedules it). */
  expiryMaxSleepMs?: number;
  /** Told each new session's expiresAt (ms): server.ts's expiry sweep wakes by it. */
  onSessionCreated?: (expiresAt: number) => void;
  /** Webhook delivery (`CTL_WEBHOOK_*`, service-kit webhookRetryFromEnv) and a fetch for tests. */
  webhooks?: WebhookRetrySettings & { fetch?: typeof fetch };
  /**
   * Seals the private keys and secrets the gateway stores (keys/custody.ts); default: the
   * development KEK file beside the SQLite database (./data/gateway.kek otherwise).
   */
  sealer?: SecretSealer;
  /** The receipt key when held outside the database (CTL_GATEWAY_RECEIPT_KEY_PKCS11_URI, …). */
  receiptKey?: ExternalKey;
  /**
   * Keys held outside the database by purpose (CTL_GATEWAY_<PURPOSE>_KEY_PKCS11_URI, …); `receiptKey` is
   * `externalKeys.receipt`.
   */
  externalKeys?: Partial<Record<'grant' | 'receipt' | 'bundle', ExternalKey>>;
  /**
   * `Idempotency-Key` on /proxy (README "Idempotency-Key"): lease (default reconcileStaleMs), 24 h ttl, stored body
   * bound.
   */
  idempotency?: IdempotencyOptions;
  /**
   * Per budget owner and per session (service-kit/service-limits.ts); default
   * DEFAULT_GATEWAY_RATE_LIMITS, a missing entry is no limit.
   */
  rateLimits?: GatewayRateLimits;
  /** `CTL_GATEWAY_MAX_SESSION_SECONDS`: how far ahead `expiresAt` may be (default 30 days). */
  maxSessionSeconds?: number;
  /** `CTL_GATEWAY_MAX_SESSION_DEPTH`: levels of child sessions below a root session (PROTOCOL.md §14; default 4). */
  maxSessionDepth?: number;
  /** Told of every event (tests, logs). */
  onEvent?: (type: GatewayEventType, data: Record<string, unknown>) => void;
  /**
   * The transparency log (service-kit/tlog, `CTL_GATEWAY_LOG_*`): settings beside the defaults, and the fetch its
   * witness requests use; `false`: no log (development and the cost bench only).
   */
  log?: (Partial<Omit<ServiceLogConfig, 'prefix'>> & { fetch?: typeof fetch }) | false;
  /** The console (/console): its built files (default build/console/) and live-stream bounds. */
  console?: { dir?: string; maxStreamsPerOwner?: number; maxStreams?: number; heartbeatMs?: number };
  /** `CTL_ANCHOR_*`: where the log's checkpoint (audit head, log off) is anchored (service-kit/anchor/config.ts). */
  anchoring?: AnchorSettings & { unknown: string[] };
  /** Where CTL_PKCS11_MODULE is read for an anchoring key in a token (default none: the module default). */
  anchoringEnv?: Record<string, string | undefined>;
  /** Ledgers besides the configured ones, and timing over CTL_ANCHOR_*_MS (tests). */
  ledgers?: Ledger[];
  anchorTiming?: ServiceAnchoringOptions['timing'];
  onChainEvent?: (e: ChainEvent) => void;
}

/**
 * What the database holds for the app, read (or made, once per database) by prepareGateway in
 * server.ts after the migrations: the sealer, the initialised key ring and the stored secrets.
 */
export interface GatewayParts {
  sealer: SecretSealer;
  /** Initialised (`await keys.init()`). */
  keys: KeyRing;
  sessionKeys: SessionKeys;
  /** The continuation HMAC key (README "Secrets at rest"). */
  continuationSecret: Buffer;
  /** The EVM account x402 merchants are paid from: configured, or made once and kept. */
  evmPrivateKey: `0x${string}`;
  /** The transparency log's keys (service-kit/tlog); absent: no log. */
  log?: ServiceLogParts;
  /** The ledgers the log's checkpoint is anchored on (opened: their signers included). */
  ledgers?: Ledger[];
}

/** What every part of the wiring shares: the database, the clock, names, the rails, the metrics. */
export interface GatewayCore {
  db: SqlDatabase;
  now: () => number;
  logger: Logger;
  issuer: string;
  /** The address guard every outbound request passes (net/address-guard.ts). */
  targets: TargetPolicy;
  /** The ledger rail on this database: merchant mode's charges (routes/merchant.ts) are paid on it. */
  ledger: ReturnType<typeof createLedgerRail>;
  /** Pays merchants: `deps.rail`, else the ledger. */
  rail: Rail;
  metrics: Metrics;
  business: GatewayMetrics;
}

export function gatewayCore(deps: GatewayDeps): GatewayCore {
  const { db } = deps;
  const now = deps.now ?? Date.now;
  const logger = deps.logger ?? silentLogger();
  const issuer = deps.issuer ?? 'ctl-gateway';
  const targets = deps.targets ?? { allowPrivate: false };
  const ledger = createLedgerRail(db, now);
  const rail = deps.rail ?? ledger;
  const metrics = createMetrics({ prefix: 'ctl_gateway_' });
  const business = gatewayMetrics(metrics.registry, db);
  return { db, now, logger, issuer, targets, ledger, rail, metrics, business };
}
