/**
 * Session events (spec §6, issue 4 §6), delivered to the session's `webhookUrl` with the
 * service-kit Standard Webhooks dispatcher (signed, retried with backoff, every delivery in the
 * dispatch log `gw_webhook_dispatches`). Emitters call these after the store change that caused
 * the event has committed, and only the caller whose conditional UPDATE made the change emits,
 * so two instances never send one event twice.
 */
import { createWebhookDispatcher, type DispatchLog, type WebhookDispatcher } from '../../service-kit/index.js';
import type { SessionRecord } from '../store/sessions.js';

export type GatewayEventType =
  | 'payment.completed'
  | 'payment.denied'
  | 'session.threshold_crossed'
  | 'session.paused'
  | 'session.revoked'
  | 'session.expired';

export interface GatewayEvents {
  emit(session: Pick<SessionRecord, 'id' | 'webhookUrl' | 'webhookSecret'>, type: GatewayEventType, data: Record<string, unknown>): void;
  /** Resolves when every queued delivery has been delivered or given up. */
  idle(): Promise<void>;
  close(): void;
}

export interface EventOptions {
  log: DispatchLog;
  fetch?: typeof fetch;
  maxAttempts?: number;
  baseDelayMs?: number;
  onError?: (e: unknown) => void;
  /** Also told of every event (metrics, tests). */
  onEvent?: (type: GatewayEventType, data: Record<string, unknown>) => void;
}

export function createGatewayEvents(options: EventOptions): GatewayEvents {
  const live = new Set<WebhookDispatcher>();
  let closed = false;
  return {
    emit(session, type, data) {
      const payload = { sessionId: session.id, ...data };
      options.onEvent?.(type, payload);
      if (closed || !session.webhookUrl || !session.webhookSecret) return;
      const d = createWebhookDispatcher({
        endpoints: [{ url: session.webhookUrl, secret: session.webhookSecret }],
        log: options.log,
        fetch: options.fetch,
        maxAttempts: options.maxAttempts,
        baseDelayMs: options.baseDelayMs,
        onError: options.onError,
      });
      live.add(d);
      d.dispatch(type, payload);
      void d.idle().finally(() => live.delete(d));
    },
    async idle() {
      while (live.size) await Promise.all([...live].map((d) => d.idle()));
    },
    close() {
      closed = true;
      for (const d of live) d.close();
    },
  };
}
