/**
 * The authority's transparency-log entries (service-kit/tlog/entries.ts): each grant issued (the
 * signed PolicyGrant), each grant revocation and link revocation, and each Trust Bundle issued
 * (the signed bundle). Derived from the audit entry that records the change, in the same
 * transaction (audit-trail.ts), so no grant, revocation or bundle commits without its entry.
 */
import type { AuditEntry, SqlExecutor } from '../service-kit/index.js';
import { entryOrDigest, type LogEntry, type TransparencyLog } from '../service-kit/tlog/index.js';

async function logged(q: SqlExecutor, e: AuditEntry): Promise<{ entry: LogEntry; ref: string } | undefined> {
  const data = JSON.parse(e.data) as Record<string, unknown>;
  const record = { ...data, at: e.at, actor: e.actor };
  switch (e.action) {
    case 'grant.issue': {
      const g = await q.get<{ grant_json: string }>('SELECT grant_json FROM grants WHERE grant_id = ?', [e.subject]);
      if (!g) throw new Error(`log: grant '${e.subject}' is not in this transaction`);
      return {
        entry: entryOrDigest('grant', JSON.parse(g.grant_json), { grantId: e.subject }),
        ref: `grant:${e.subject}`,
      };
    }
    case 'grant.revoke':
      return {
        entry: entryOrDigest('grant.revocation', { grantId: e.subject, ...record }, { grantId: e.subject }),
        ref: `revocation:${e.subject}`,
      };
    case 'delegation.revoke':
      return {
        entry: entryOrDigest('link.revocation', { delegationId: e.subject, ...record }, { delegationId: e.subject }),
        ref: `link:${e.subject}`,
      };
    case 'bundle.issue': {
      const b = await q.get<{ bundle_json: string }>('SELECT bundle_json FROM bundles WHERE bundle_id = ?', [
        e.subject,
      ]);
      if (!b) throw new Error(`log: bundle '${e.subject}' is not in this transaction`);
      return {
        entry: entryOrDigest('bundle', JSON.parse(b.bundle_json), { bundleId: e.subject }),
        ref: `bundle:${e.subject}`,
      };
    }
    default:
      return undefined;
  }
}

/** Appends the log entry of audit entry `e`, if its action is logged, in its transaction `q`. */
export async function appendAuthorityLog(
  log: TransparencyLog | undefined,
  q: SqlExecutor,
  e: AuditEntry,
): Promise<void> {
  if (!log) return;
  const l = await logged(q, e);
  if (l) await log.append(q, l.entry, l.ref);
}
