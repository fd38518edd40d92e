/**
 * What the services log. Every entry is the UTF-8 JCS (RFC 8785) text of `{ "type", "body" }`:
 *
 * Gateway (`ref` finds an entry's index again):
 * - `receipt`: the signed receipt (`ctl-receipt/1`) as the agent got it; ref `receipt:<receiptId>`;
 * - `session.created`: `{ sessionId, at, actor, ownerId, policyHash, grantId, budget, expiresAt?,
 *   windows?, windowsStart? }`, and `parentId` for a child session; ref `session:<sessionId>`;
 * - `session.paused`, `session.continued`, `session.revoked`, `session.expired`: `{ sessionId, at,
 *   actor, …the event's data }` (never a continuation token); ref `session:<sessionId>`.
 *
 * Authority:
 * - `grant`: the signed PolicyGrant (`ctl-grant/1`); ref `grant:<grantId>`;
 * - `grant.revocation`: `{ grantId, at, actor, reason?, revocation? }` (`revocation`: the person's
 *   signed `ctl-revocation/1`); ref `revocation:<grantId>`;
 * - `link.revocation`: `{ delegationId, rootGrantId, revocationId, at, actor, reason?, revocation? }`;
 *   ref `link:<delegationId>`;
 * - `bundle`: the signed Trust Bundle (`ctl-bundle/1`); ref `bundle:<bundleId>`.
 *
 * An entry is at most 65,535 bytes (tlog-tiles entry bundles): a larger record is logged as
 * `<type>.digest` (entryOrDigest).
 */
import { createHash } from 'node:crypto';
import { canonicalize } from '../../src/index.js';
import { encodeEntry, type EncodedEntry } from './log.js';

export type GatewayLogType =
  'receipt' | 'session.created' | 'session.paused' | 'session.continued' | 'session.revoked' | 'session.expired';

export type AuthorityLogType = 'grant' | 'grant.revocation' | 'link.revocation' | 'bundle';

/** The gateway session events that are logged (sessions/events.ts). */
export const LOGGED_SESSION_EVENTS: ReadonlySet<string> = new Set([
  'session.created',
  'session.paused',
  'session.continued',
  'session.revoked',
  'session.expired',
]);

/** The largest entry a tlog-tiles entry bundle holds. */
export const MAX_ENTRY_BYTES = 0xffff;

/**
 * `{ type, body }`, or when that would not fit an entry bundle, `{ type: '<type>.digest', body:
 * { ...summary, sha256 } }` with the hex SHA-256 of the body's JCS text: the record is then
 * committed to by its hash (a Trust Bundle listing thousands of revoked grants can be larger).
 */
export function entryOrDigest(type: string, body: unknown, summary: Record<string, unknown>): EncodedEntry {
  const whole = { type, body };
  // Encoded once: the size check's bytes are the ones the log row keeps (log.ts row).
  const bytes = encodeEntry(whole);
  if (bytes.length <= MAX_ENTRY_BYTES) return { ...whole, bytes };
  const sha256 = createHash('sha256').update(canonicalize(body)).digest('hex');
  const digest = { type: `${type}.digest`, body: { ...summary, sha256 } };
  return { ...digest, bytes: encodeEntry(digest) };
}
