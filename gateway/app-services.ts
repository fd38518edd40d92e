/**
 * The gateway's services and its money path (createGatewayApp): the 402 schemes and their rails,
 * the owners' rate limits, sessions, `Idempotency-Key`, payments and the exchange that answers a
 * merchant's 402, the egress CA; and the expiry of sessions that server.ts's sweep runs.
 */
import type { SqlDatabase } from '../service-kit/index.js';
import { gatewayRateLimits, DEFAULT_GATEWAY_RATE_LIMITS } from '../service-kit/service-limits.js';
import { createPaymentSchemes } from './payments/registry.js';
import { createExchange } from './payments/exchange.js';
import { DEFAULT_EXPIRY_MARGIN_MS } from './payments/evm/chain.js';
import { DEFAULT_MAX_TIMEOUT_SECONDS, holdCap } from './payments/evm/assets.js';
import { createPaymentService } from './payments/service.js';
import { currentWindows } from './payments/store/counters.js';
import { createSessionService } from './sessions/service.js';
import { DEFAULT_MAX_SESSION_SECONDS } from './sessions/config.js';
import { expireDue, sessionById } from './sessions/store.js';
import type { GatewayEvents } from './sessions/events.js';
import type { HumanTrust } from './sessions/human.js';
import { createOwnerAuth } from './owners/auth.js';
import { createEgressCa } from './egress/ca.js';
import { createIdempotencyService } from './idempotency/service.js';
import type { GatewayCore, GatewayDeps, GatewayParts } from './app-deps.js';

// Gateway statuses where they differ from service-kit's defaults.
export const STATUS_BY_CODE = { session_paused: 409, currency_mismatch: 402, payment_failed: 502 };

export type GatewayServices = ReturnType<typeof createServices>;

/** `humans`: the trusted authorities and their fetch (app-outbound.ts); `events`: app-log.ts. */
export function createServices(
  deps: GatewayDeps,
  parts: GatewayParts,
  core: GatewayCore,
  humans: HumanTrust,
  events: GatewayEvents,
) {
  const { db, now, logger, issuer, targets, rail, business } = core;
  const { keys, sessionKeys, continuationSecret } = parts;
  const paymentSchemes = createSchemes(deps, parts, core);
  const limits = gatewayRateLimits(
    db,
    deps.rateLimits ?? DEFAULT_GATEWAY_RATE_LIMITS,
    createOwnerAuth(db, deps.adminKey),
  );
  const sessionService = createSessionService({
    db,
    currentWindows,
    keys,
    sessionKeys,
    events,
    issuer,
    railName: rail.name,
    extraRails: paymentSchemes.rails.map((r) => r.name),
    continuationSecret,
    targets,
    humans,
    now,
    onCreated: (at) => deps.onSessionCreated?.(at),
    maxSessionSeconds: deps.maxSessionSeconds ?? DEFAULT_MAX_SESSION_SECONDS,
    maxSessionDepth: deps.maxSessionDepth,
  });
  // The session service, rate limited per session.
  const sessions = limits.sessions(sessionService);
  // Made on first use (GET /ca.pem, the first CONNECT), kept sealed like the other secrets.
  const egressCa = createEgressCa({ db, sealer: parts.sealer, issuer, now });
  const idempotency = createIdempotencyService({
    db,
    now,
    statusByCode: STATUS_BY_CODE,
    logger,
    leaseMs: deps.reconcileStaleMs,
    ...deps.idempotency,
  });
  const payments = createPaymentService({
    db,
    rail,
    otherRails: paymentSchemes.rails,
    keys,
    sessionKeys,
    events,
    continuationSecret,
    issuer,
    now,
    paymentId: idempotency.paymentId,
    humans,
    onPaid: business.paid,
    onRefused: business.refused,
    onReconciled: business.reconciled,
    onReconcileError: (paymentId, err) =>
      logger.warn({ err, paymentId }, 'reconcile: payment left open, retried next pass'),
  });
  const protocols = createExchange({ db, payments, schemes: paymentSchemes.schemes, now });
  return {
    evmAddress: paymentSchemes.evmAddress,
    limits,
    /** The owner auth, rate limited per budget owner. */
    auth: limits.auth,
    sessionService,
    sessions,
    egressCa,
    idempotency,
    payments,
    protocols,
  };
}

/** The 402 schemes (payments/registry.ts): x402 and MPP sign with one EVM account, on the same chains. */
function createSchemes(deps: GatewayDeps, parts: GatewayParts, { db, now, rail }: GatewayCore) {
  return createPaymentSchemes({
    db,
    now,
    railName: rail.name,
    evm: {
      privateKey: parts.evmPrivateKey,
      assets: deps.x402?.assets ?? new Map(),
      // The cap on how long one signed authorization may hold a budget (payments/evm/assets.ts holdCap),
      // after validBefore: the expiry margin, then a reconcile pass once the row is stale.
      maxTimeoutSeconds: holdCap({
        maxTimeoutSeconds: deps.x402?.maxTimeoutSeconds ?? DEFAULT_MAX_TIMEOUT_SECONDS,
        maxHoldSeconds: deps.x402?.maxHoldSeconds,
        settleDelayMs:
          (deps.x402?.expiryMarginMs ?? DEFAULT_EXPIRY_MARGIN_MS) +
          (deps.reconcileStaleMs ?? 120_000) +
          (deps.reconcileIntervalMs ?? 30_000),
      }),
      chain: deps.x402?.chain,
      expiryMarginMs: deps.x402?.expiryMarginMs,
    },
  });
}

/** Expires the sessions past their `expiresAt`, each with its `session.expired` event; their ids. */
export async function expireSessions(db: SqlDatabase, now: () => number, events: GatewayEvents): Promise<string[]> {
  return expireDue(
    db,
    now(),
    events.effect(async (ended, q) => {
      const sessions = await Promise.all(ended.map((id) => sessionById(q, id)));
      return sessions.flatMap((s) =>
        s
          ? [
              {
                session: s,
                type: 'session.expired' as const,
                data: { expiredAt: new Date(s.expiresAt).toISOString() },
                actor: 'system',
              },
            ]
          : [],
      );
    }),
  );
}
