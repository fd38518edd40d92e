/**
 * Every state-changing call lands here once it has happened (issue 3 §3): one audit entry in the
 * hash chain, then, off the request path, a signed webhook per configured endpoint and an anchor
 * of the new chain head.
 */
import type { AuditEntry, Logger, WebhookDispatcher } from '../service-kit/index.js';
import type { AnchorQueue } from './anchor.js';
import type { AuthorityStore } from './store/types.js';

export interface AuditTrail {
  record(actor: string, action: string, subject: string, data?: unknown): Promise<AuditEntry>;
}

export function createAuditTrail(deps: { store: AuthorityStore; webhooks?: WebhookDispatcher; anchors?: AnchorQueue; logger?: Logger; now: () => number }): AuditTrail {
  return {
    async record(actor, action, subject, data) {
      const entry = await deps.store.audit.append({ actor, action, subject, data, at: new Date(deps.now()).toISOString() });
      deps.webhooks?.dispatch('audit.appended', { ...entry, data: JSON.parse(entry.data) });
      deps.anchors?.submit({ seq: entry.seq, hash: entry.hash, at: entry.at });
      return entry;
    },
  };
}
