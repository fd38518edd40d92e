/**
 * Every state-changing call is recorded inside its own transaction: `entry(…)` is the effect a
 * store change runs before it commits (store/types.ts), which appends one entry to the hash
 * chain and writes one webhook delivery per configured endpoint to the outbox. So a change that
 * commits has its entry and its deliveries, and one that rolls back has neither. After the
 * commit the outbox is woken. A revocation's entry also queues its revocation token in the chain
 * outbox (revocation-tokens.ts); the chain's head is anchored by that outbox's timer, never here.
 */
import type { AuditEntry, Logger, OutboxEndpoint, SqlExecutor, TxEffect, WebhookOutbox } from '../service-kit/index.js';
import type { ChainOutbox } from '../service-kit/anchor/index.js';
import { revocationTokenHook } from './revocation-tokens.js';
import type { AuthorityStore } from './store/types.js';
import type { TransparencyLog } from '../service-kit/tlog/index.js';
import { appendAuthorityLog } from './log-entries.js';

/** The audit webhooks: the outbox and the endpoints every entry is delivered to (`target` = URL). */
export interface AuditWebhooks {
  outbox: WebhookOutbox;
  endpoints: OutboxEndpoint[];
}

export interface AuditTrail {
  /**
   * The effect that records a change in its transaction: the entry when `when(result)` (default
   * always), with `data` given or computed from the result.
   * @example await d.store.revokeGrant(id, by, d.audit.entry(actor, 'grant.revoke', id, {}, (r) => r.changed))
   */
  entry<R>(
    actor: string,
    action: string,
    subject: string,
    data?: unknown | ((result: R) => unknown),
    when?: (result: R) => boolean,
  ): TxEffect<R>;
  /**
   * An entry (and its deliveries) in a transaction of its own: for an action whose change is not a store call here
   * (prefer `entry`).
   */
  record(actor: string, action: string, subject: string, data?: unknown): Promise<AuditEntry>;
}

export function createAuditTrail(deps: {
  store: AuthorityStore;
  webhooks?: AuditWebhooks;
  /** Anchors and revocation tokens (service-kit/anchor/outbox.ts). */
  chain?: ChainOutbox;
  logger?: Logger;
  now: () => number;
  /** The transparency log: grants, revocations and bundles are appended with their audit entry (log-entries.ts). */
  log?: TransparencyLog;
}): AuditTrail {
  const mint = deps.chain ? revocationTokenHook(deps.chain) : undefined;
  /** What an entry causes in its transaction: a revocation token, its webhook deliveries. */
  const deliver = async (q: SqlExecutor, entry: AuditEntry) => {
    await appendAuthorityLog(deps.log, q, entry);
    if (mint) await mint(q, entry);
    if (!deps.webhooks) return;
    await deps.webhooks.outbox.enqueue(
      q,
      { type: 'audit.appended', data: { ...entry, data: JSON.parse(entry.data) }, at: Date.parse(entry.at) },
      deps.webhooks.endpoints,
    );
  };
  const committed = (entry: AuditEntry) => () => {
    deps.log?.kick();
    deps.webhooks?.outbox.kick();
    // A revocation's token goes out soon, not at the next tick of the anchoring interval.
    if (entry.action.endsWith('.revoke')) deps.chain?.kick();
  };
  return {
    entry(actor, action, subject, data, when) {
      return async (q, result) => {
        if (when && !when(result)) return undefined;
        const value = typeof data === 'function' ? (data as (r: typeof result) => unknown)(result) : data;
        const entry = await deps.store.audit.append(
          { actor, action, subject, data: value, at: new Date(deps.now()).toISOString() },
          q,
          deliver,
        );
        return committed(entry);
      };
    },
    async record(actor, action, subject, data) {
      const entry = await deps.store.audit.append(
        { actor, action, subject, data, at: new Date(deps.now()).toISOString() },
        undefined,
        deliver,
      );
      committed(entry)();
      return entry;
    },
  };
}
