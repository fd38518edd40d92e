/**
 * The transparent payment gateway (spec §1 part 1): `createGatewayApp(deps, parts)` builds the
 * Koa app with no side effects, as the authority's does; server.ts migrates the database, prepares
 * the parts, starts the background work (startGatewayWork: the expiry sweep, reconciliation,
 * webhooks) and listens.
 * Everything shared between instances lives in the database, so any number of instances can serve
 * one PostgreSQL database. The wiring is by concern: app-outbound.ts (the forwarders), app-log.ts
 * (events, the transparency log, anchoring), app-services.ts (sessions and the money path) and
 * app-http.ts (middleware and routes, in order), over app-deps.ts (what the app is built from).
 */
import type Koa from 'koa';
import { nextExpiry } from './sessions/store.js';
import type { GatewayEvents } from './sessions/events.js';
import type { ChainOutbox } from '../service-kit/anchor/index.js';
import type { EgressHooks } from './egress/proxy-server.js';
import type { ServiceLog } from '../service-kit/tlog/index.js';
import { createOutbound } from './app-outbound.js';
import { createRecord, createSessionListeners } from './app-log.js';
import { createServices, expireSessions } from './app-services.js';
import { createHttpApp } from './app-http.js';
import { gatewayCore, type GatewayDeps, type GatewayParts } from './app-deps.js';

export type { GatewayCore, GatewayDeps, GatewayParts } from './app-deps.js';

export interface GatewayApp {
  app: Koa;
  /** The address the gateway pays x402 merchants from (fund it with the mapped assets). */
  evmAddress: `0x${string}`;
  /** Settles payments left open by a crash (server.ts runs it at start and on a timer). */
  reconcile(staleMs?: number): Promise<{ committed: number; released: number }>;
  /** Expires due sessions now (server.ts's expiry sweep calls it). */
  expireNow(): Promise<string[]>;
  /** When the next session expires (ms), or undefined when none will. */
  nextExpiry(): Promise<number | undefined>;
  /** Drops `Idempotency-Key` answers past their ttl (server.ts, with each reconcile pass). */
  pruneIdempotency(): Promise<unknown>;
  /** Pins the base URL to the listen address when no public URL is configured (server.ts, once listening). */
  pinListenUrl(url: string): void;
  /** Session events: server.ts starts their webhook outbox and audit sealer (`events.start()`). */
  events: GatewayEvents;
  /** Resolves when queued webhook deliveries are done. */
  idle(): Promise<void>;
  /** The transparency log (/log/…); server.ts starts its checkpoint timer. Undefined when the log is off. */
  log?: ServiceLog;
  /** Anchors of the log's checkpoint, or of the audit chain's head with the log off (service-kit/anchor/). */
  chain: ChainOutbox;
  /** What the egress proxy needs besides `app` (egress/proxy-server.ts; server.ts starts it when configured). */
  egress: EgressHooks;
  /** Stops what the app built (forwarders, streams, the outboxes server.ts started); the database stays open. */
  close(): Promise<void>;
}

/**
 * Builds the app from prepared parts without touching the database, starting a timer or
 * listening: server.ts (openGateway) starts the background work (startGatewayWork) and listens.
 * @example const gw = createGatewayApp(deps, await prepareGateway(deps)); const work = await startGatewayWork(gw, deps)
 */
export function createGatewayApp(deps: GatewayDeps, parts: GatewayParts): GatewayApp {
  const core = gatewayCore(deps);
  const { db, now } = core;
  const outbound = createOutbound(deps, core.targets);
  // A console stream is opened with an owner's API key, checked per request by the services' owner auth.
  const listeners = createSessionListeners(deps, core, async (key) => (await services.auth(key))?.ownerId);
  const record = createRecord(deps, parts, core, outbound.hookForwarder, listeners);
  const { serviceLog, events, chain } = record;
  // The base URL written into grants (revocationUrl) and responses never comes from a request
  // (a Host header would let a caller point a grant's revocation check at its own server): the
  // configured public URL, else the listen address pinned by server.ts, else the address the
  // connection was accepted on.
  let pinnedBase = deps.publicUrl?.replace(/\/+$/, '');
  const baseUrl = (ctx: Koa.Context) => pinnedBase ?? localOrigin(ctx);
  const services = createServices(deps, parts, core, outbound.humans, events);
  const app = createHttpApp(deps, core, {
    keys: parts.keys,
    forwarder: outbound.forwarder,
    record,
    services,
    consoleStreams: listeners.consoleStreams,
    baseUrl,
  });

  const staleMs = deps.reconcileStaleMs ?? 120_000;
  const reconcile = (ms = staleMs) => services.payments.reconcile(ms);

  return {
    app,
    evmAddress: services.evmAddress,
    reconcile,
    expireNow: () => expireSessions(db, now, events),
    pinListenUrl(url) {
      if (!deps.publicUrl) pinnedBase = url.replace(/\/+$/, '');
    },
    nextExpiry: () => nextExpiry(db),
    pruneIdempotency: () => services.idempotency.prune(),
    events,
    idle: () => events.idle(),
    log: serviceLog,
    chain,
    egress: {
      sessionByToken: (token) => services.sessionService.byToken(token),
      ca: services.egressCa,
      targets: core.targets,
      resolve: deps.resolve,
      now,
      ends: listeners.sessionEnds,
      rateLimitBackend: db,
    },
    async close() {
      await serviceLog?.close();
      await chain.close();
      await events.close();
      await listeners.consoleStreams.close();
      outbound.close();
    },
  };
}

/** `http://<local address>:<port>` of the accepted connection: the listen address, whatever the Host header says. */
function localOrigin(ctx: Koa.Context): string {
  const a = (ctx.socket.localAddress ?? '127.0.0.1').replace(/^::ffff:(?=\d+\.)/, '');
  return `http://${a.includes(':') ? `[${a}]` : a}:${ctx.socket.localPort}`;
}
