/**
 * What the gateway records, and who hears of it (createGatewayApp): the session events (the audit
 * chain and the owners' webhooks), the transparency log every receipt and session change is
 * appended to, and the chain outbox that anchors the log's checkpoint for outside witnesses. The
 * console's live streams and the egress proxy's tunnels hear of session changes through the events.
 */
import { createConsoleStreams, type ConsoleStreams } from './console/stream.js';
import { createSessionEnds, type SessionEnds } from './egress/tunnel-watch.js';
import { createGatewayEvents, type GatewayEvents } from './sessions/events.js';
import { guardedFetch, type Forwarder } from './net/forwarder.js';
import {
  auditHeadSource,
  auditOrigin,
  checkpointSource,
  createServiceChainOutbox,
  type AnchorSource,
  type ChainOutbox,
} from '../service-kit/anchor/index.js';
import { createServiceLog, type ServiceLog } from '../service-kit/tlog/index.js';
import type { GatewayCore, GatewayDeps, GatewayParts } from './app-deps.js';

/** Who hears of session changes besides the webhooks. */
export interface SessionListeners {
  /** The console's live streams (/console). */
  consoleStreams: ConsoleStreams;
  /** Sessions revoked or expired here: the egress proxy closes their tunnels (egress/tunnel-watch.ts). */
  sessionEnds: SessionEnds;
}

/** `ownerOfKey`: the budget owner of an API key, or undefined; a stream is opened with one. */
export function createSessionListeners(
  deps: GatewayDeps,
  core: GatewayCore,
  ownerOfKey: (apiKey: string) => Promise<string | undefined>,
): SessionListeners {
  const { db, now, logger } = core;
  const consoleStreams = createConsoleStreams({
    db,
    now,
    maxPerOwner: deps.console?.maxStreamsPerOwner,
    maxTotal: deps.console?.maxStreams,
    heartbeatMs: deps.console?.heartbeatMs,
    ownerOfKey,
    onError: (e) => logger.warn({ err: e }, 'console stream'),
  });
  const sessionEnds = createSessionEnds(db, now);
  return { consoleStreams, sessionEnds };
}

export interface GatewayRecord {
  /** The transparency log; undefined when it is off. */
  serviceLog?: ServiceLog;
  events: GatewayEvents;
  /** What the chain outbox anchors: the log's checkpoint, or the audit chain's head with the log off. */
  anchorSources: AnchorSource[];
  chain: ChainOutbox;
}

/** `hookForwarder`: the webhooks' way out (app-outbound.ts). */
export function createRecord(
  deps: GatewayDeps,
  parts: GatewayParts,
  core: GatewayCore,
  hookForwarder: Forwarder,
  listeners: SessionListeners,
): GatewayRecord {
  const { db, now, logger, issuer, metrics, business } = core;
  // Every receipt and session change is appended to it in its own transaction (log/entries.ts).
  const serviceLog =
    parts.log &&
    createServiceLog(db, parts.log, {
      registry: metrics.registry,
      metricPrefix: 'ctl_gateway_',
      logger,
      now,
      fetch: deps.log ? deps.log.fetch : undefined,
      onSplitView: async (s) => {
        await events.audit.append({ actor: 'system', action: 'log.split_view', subject: s.origin, data: s });
      },
    });
  const events = createGatewayEvents({
    db,
    now,
    log: serviceLog?.log,
    continuationSecret: parts.continuationSecret,
    fetch: guardedFetch(hookForwarder),
    ...deps.webhooks,
    onError: (e) => logger.warn({ err: e }, 'webhook delivery failed'),
    onDelivery: business.delivery,
    onEvent: (type, data) => {
      if ((type === 'session.revoked' || type === 'session.expired') && typeof data.sessionId === 'string')
        listeners.sessionEnds.ended(data.sessionId, type === 'session.revoked' ? 'revoked' : 'expired');
      listeners.consoleStreams.publish(type, data);
      deps.onEvent?.(type, data);
    },
  });
  // The log's signed checkpoint, anchored by the chain outbox's timer; with the log off, the audit
  // chain's head under a stable name (the public URL's host, else the issuer), the anchor records
  // saying which (service-kit/anchor/service.ts).
  const anchorSources = [
    serviceLog
      ? checkpointSource(serviceLog.log)
      : auditHeadSource(
          events.audit,
          deps.publicUrl ? auditOrigin(deps.publicUrl, 'gateway') : `${issuer}/ctl-gateway-audit`,
        ),
  ];
  const chain = createServiceChainOutbox({
    db,
    table: 'gw_chain_outbox',
    ledgers: parts.ledgers ?? [],
    sources: anchorSources,
    settings: deps.anchoring,
    timing: deps.anchorTiming,
    logger,
    metrics: { registry: metrics.registry, prefix: 'ctl_gateway_' },
    now,
    onEvent: deps.onChainEvent,
  });
  return { serviceLog, events, anchorSources, chain };
}
