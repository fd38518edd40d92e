/**
 * Sessions in the store. State changes are single conditional UPDATEs (revoke, expire,
 * continue), so two gateway instances on one database agree without any in-memory state.
 */
import type { PolicyGrant, WindowPeriod } from '../../src/index.js';
import { changeWith, type SqlDatabase, type SqlExecutor, type Row, type TxEffect } from '../../service-kit/index.js';
import { forUpdate } from '../../service-kit/row-lock.js';
import { raiseBundleSequence } from '../keys/bundle-sequence.js';

export type SessionState = 'active' | 'paused' | 'revoked' | 'expired';
/** Who stopped a session: its owner (DELETE /sessions/:id) or the admin (a session or the whole owner). */
export type RevokedBy = 'owner' | 'admin';

/** A session's controls as the owner set them (POST /sessions; sessions/config.ts reads them). */
export interface SessionConfig {
  budget: { amount: string; currency: string };
  purposes: string[];
  expiresAt: string;
  label: string;
  merchantAllowlist: string[];
  merchantBlocklist: string[];
  velocity?: { maxPaymentsPerHour?: number; maxAmountPerMerchantPerDay?: string };
  /** Fixed budget windows (PROTOCOL.md §13), counted from `windowsStart` (default: creation). */
  windows?: SessionWindow[];
  windowsStart?: string;
  softLimit?: { amount: string };
  webhookUrl?: string;
  /** Percentages of the ceiling whose crossing emits session.threshold_crossed (spec §6). */
  thresholds: number[];
  trustLevel: 0 | 1;
  /**
   * The purpose of a payment whose request names none (an unmodified agent behind the egress
   * proxy cannot send X-Ctl-Purpose): one of `purposes`, concrete.
   */
  defaultPurpose?: string;
}

/** One budget window of a session (PROTOCOL.md §13). */
export interface SessionWindow {
  every: WindowPeriod;
  maxAmountMinor: string;
  maxPayments?: number;
}

/** One window of a session as it stands now (PROTOCOL.md §13), as the money store reads it. */
export interface WindowStanding {
  every: SessionWindow['every'];
  startsAt: number;
  endsAt: number;
  maxAmount: bigint;
  maxPayments: bigint | null;
  spent: bigint;
  reserved: bigint;
  payments: bigint;
}

/**
 * Reads each window's standing of a session (the money store's currentWindows): the window rows
 * are the money store's, which sits above the sessions room, so the app hands the reader in.
 */
export type CurrentWindows = (
  q: SqlExecutor,
  s: { id: string; windows: SessionWindow[]; windowsStart: number },
  now: number,
) => Promise<WindowStanding[]>;

/** The window whose soft limit paused a session: it resumes by itself at `endsAt`. */
export interface PausedWindow {
  every: SessionWindow['every'];
  startsAt: number;
  endsAt: number;
}

export interface SessionRecord {
  id: string;
  ownerId: string;
  tokenHash: string;
  label: string;
  currency: string;
  ceiling: bigint;
  spent: bigint;
  reserved: bigint;
  state: SessionState;
  expiresAt: number;
  createdAt: number;
  endedAt: number | null;
  revokedBy: RevokedBy | null;
  config: SessionConfig;
  policyHash: string;
  grantId: string;
  grant: PolicyGrant;
  actorKeyPem: string;
  softLimit: bigint | null;
  continuationNonce: string | null;
  maxPerHour: number | null;
  maxPerMerchantDay: bigint | null;
  webhookUrl: string | null;
  webhookSecret: string | null;
  /** Percent thresholds of the ceiling that emit session.threshold_crossed (spec §6). */
  thresholds: number[];
  /** The session this child session narrows (PROTOCOL.md §14), or null for a root session. */
  parentId: string | null;
  /** `/root/…/self/`: the chain every payment reserves on. */
  path: string;
  depth: number;
  /** Where the windows count from (ms), or null without windows. */
  windowsStart: number | null;
  pausedWindow: PausedWindow | null;
}

/** A session's chain, itself first, then each ancestor up to the root. */
export const chainOf = (s: Pick<SessionRecord, 'path'>): string[] => s.path.split('/').filter(Boolean).reverse();

const big = (v: unknown) => BigInt(v as string | number | bigint);
const bigOrNull = (v: unknown) => (v == null ? null : big(v));
const num = (v: unknown) => Number(v as number | bigint | string);

export function toSession(r: Row): SessionRecord {
  return {
    id: r.id as string,
    ownerId: r.owner_id as string,
    tokenHash: r.token_hash as string,
    label: r.label as string,
    currency: r.currency as string,
    ceiling: big(r.ceiling),
    spent: big(r.spent),
    reserved: big(r.reserved),
    state: r.state as SessionState,
    expiresAt: num(r.expires_at),
    createdAt: num(r.created_at),
    endedAt: r.ended_at == null ? null : num(r.ended_at),
    revokedBy: (r.revoked_by as RevokedBy | null) ?? null,
    config: JSON.parse(r.config as string),
    policyHash: r.policy_hash as string,
    grantId: r.grant_id as string,
    grant: JSON.parse(r.grant_json as string),
    actorKeyPem: r.actor_key_pem as string,
    softLimit: bigOrNull(r.soft_limit),
    continuationNonce: (r.continuation_nonce as string | null) ?? null,
    maxPerHour: r.max_per_hour == null ? null : num(r.max_per_hour),
    maxPerMerchantDay: bigOrNull(r.max_per_merchant_day),
    webhookUrl: (r.webhook_url as string | null) ?? null,
    webhookSecret: (r.webhook_secret as string | null) ?? null,
    thresholds: JSON.parse((r.thresholds as string) || '[]'),
    parentId: (r.parent_id as string | null) ?? null,
    path: (r.path as string | null) ?? `/${r.id as string}/`,
    depth: r.depth == null ? 0 : num(r.depth),
    windowsStart: r.windows_start == null ? null : num(r.windows_start),
    pausedWindow: r.paused_window ? JSON.parse(r.paused_window as string) : null,
  };
}

/**
 * The state a reader should see: an active or paused session past `expiresAt` is expired; a
 * session paused by a window is active again once that window ended.
 */
export function effectiveState(
  s: Pick<SessionRecord, 'state' | 'expiresAt'> & { pausedWindow?: PausedWindow | null },
  now: number,
): SessionState {
  if ((s.state === 'active' || s.state === 'paused') && now >= s.expiresAt) return 'expired';
  if (s.state === 'paused' && s.pausedWindow && now >= s.pausedWindow.endsAt) return 'active';
  return s.state;
}

/** A new session; without `parentId`/`path`/`depth`, a root session, without `windowsStart`, no windows. */
export type NewSession = Omit<
  SessionRecord,
  | 'spent'
  | 'reserved'
  | 'endedAt'
  | 'revokedBy'
  | 'continuationNonce'
  | 'state'
  | 'pausedWindow'
  | 'parentId'
  | 'path'
  | 'depth'
  | 'windowsStart'
> &
  Partial<Pick<SessionRecord, 'parentId' | 'path' | 'depth' | 'windowsStart'>>;

/**
 * Inserts a session for an owner that is not disabled; false when it is. The owner row is
 * share-locked until commit, so disabling the owner (which updates that row, then revokes its
 * live sessions) either waits for this session and revokes it, or makes this insert refuse.
 */
export async function insertOwnedSession(db: SqlDatabase, s: NewSession, effect?: TxEffect<boolean>): Promise<boolean> {
  return changeWith(
    db,
    async (t) => {
      const owner = await t.get(
        `SELECT id FROM gw_owners WHERE id = ? AND disabled_at IS NULL${t.dialect === 'postgres' ? ' FOR SHARE' : ''}`,
        [s.ownerId],
      );
      if (!owner) return false;
      await insertSession(t, s);
      return true;
    },
    effect,
  );
}

export async function insertSession(q: SqlExecutor, s: NewSession): Promise<void> {
  await q.run(
    `INSERT INTO gw_sessions (id, owner_id, token_hash, label, currency, ceiling, spent, reserved, state, expires_at,
       created_at, config, policy_hash, grant_id, grant_json, actor_key_pem, soft_limit, max_per_hour,
       max_per_merchant_day, webhook_url, webhook_secret, thresholds, parent_id, path, depth, windows_start)
     VALUES (?, ?, ?, ?, ?, ?, 0, 0, 'active', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      s.id,
      s.ownerId,
      s.tokenHash,
      s.label,
      s.currency,
      s.ceiling,
      s.expiresAt,
      s.createdAt,
      JSON.stringify(s.config),
      s.policyHash,
      s.grantId,
      JSON.stringify(s.grant),
      s.actorKeyPem,
      s.softLimit,
      s.maxPerHour,
      s.maxPerMerchantDay,
      s.webhookUrl,
      s.webhookSecret,
      JSON.stringify(s.thresholds),
      s.parentId ?? null,
      s.path ?? `/${s.id}/`,
      s.depth ?? 0,
      s.windowsStart ?? null,
    ],
  );
}

export async function sessionById(q: SqlExecutor, id: string): Promise<SessionRecord | undefined> {
  const r = await q.get(`SELECT * FROM gw_sessions WHERE id = ?`, [id]);
  return r ? toSession(r) : undefined;
}

export async function sessionByTokenHash(q: SqlExecutor, tokenHash: string): Promise<SessionRecord | undefined> {
  const r = await q.get(`SELECT * FROM gw_sessions WHERE token_hash = ?`, [tokenHash]);
  return r ? toSession(r) : undefined;
}

export async function sessionByGrantId(q: SqlExecutor, grantId: string): Promise<SessionRecord | undefined> {
  const r = await q.get(`SELECT * FROM gw_sessions WHERE grant_id = ?`, [grantId]);
  return r ? toSession(r) : undefined;
}

/** One page of an owner's sessions, newest first; `before` is the cursor (createdAt, id) of the last row seen. */
export async function listSessions(
  q: SqlExecutor,
  ownerId: string,
  limit: number,
  before?: { createdAt: number; id: string },
): Promise<SessionRecord[]> {
  const rows = before
    ? await q.all(
        `SELECT * FROM gw_sessions WHERE owner_id = ? AND (created_at < ? OR (created_at = ? AND id < ?))
         ORDER BY created_at DESC, id DESC LIMIT ?`,
        [ownerId, before.createdAt, before.createdAt, before.id, limit],
      )
    : await q.all(`SELECT * FROM gw_sessions WHERE owner_id = ? ORDER BY created_at DESC, id DESC LIMIT ?`, [
        ownerId,
        limit,
      ]);
  return rows.map(toSession);
}

/**
 * Revokes at once (spec §3 DELETE row): one conditional UPDATE, so the next reservation on any
 * instance sees it, in one transaction with the bundle sequence (PROTOCOL.md §12). Returns true
 * when this call did the revoking.
 */
export async function revokeSession(
  db: SqlDatabase,
  id: string,
  now: number,
  by: RevokedBy,
  effect?: TxEffect<SessionRecord[]>,
): Promise<boolean> {
  return (await changeWith(db, (t) => revokeLive(t, { id }, now, by), effect)).length === 1;
}

/**
 * Revokes the live sessions of one id or of one owner inside the caller's transaction, raising
 * the bundle sequence when any changed; returns those this call revoked (for their events).
 */
export async function revokeLive(
  t: SqlExecutor,
  which: { id: string } | { ownerId: string },
  now: number,
  by: RevokedBy,
): Promise<SessionRecord[]> {
  // A session's revocation stops every session below it in the same UPDATE (PROTOCOL.md §14).
  const [where, params] =
    'id' in which
      ? [
          `(id = ? OR (owner_id = (SELECT owner_id FROM gw_sessions WHERE id = ?) AND ${contains(t)}(path, ?) > 0))`,
          [which.id, which.id, `/${which.id}/`],
        ]
      : ['owner_id = ?', [which.ownerId]];
  const revoke = (w: string, p: unknown[]) =>
    t.all(
      `UPDATE gw_sessions SET state = 'revoked', ended_at = ?, continuation_nonce = NULL, revoked_by = ?
       WHERE ${w} AND state IN ('active', 'paused') AND expires_at > ? RETURNING *`,
      [now, by, ...p, now],
    );
  const rows = await revoke(where, params);
  // A child inserted while this UPDATE waited for its parent's row (a child is made under a
  // share lock on its live parent) is not in that UPDATE's snapshot: a second statement, with a
  // snapshot of its own, stops it too, so no live session is ever left below a revoked one.
  if ('id' in which && t.dialect === 'postgres')
    rows.push(
      ...(await revoke(`owner_id = (SELECT owner_id FROM gw_sessions WHERE id = ?) AND strpos(path, ?) > 0`, [
        which.id,
        `/${which.id}/`,
      ])),
    );
  if (rows.length) await raiseBundleSequence(t);
  return rows.map(toSession);
}

/** The SQL function that finds a substring (exact, case-sensitive, unlike LIKE on SQLite). */
const contains = (q: SqlExecutor) => (q.dialect === 'postgres' ? 'strpos' : 'instr');

/** Every session below `s` (its descendants), oldest first. */
export async function descendantsOf(
  q: SqlExecutor,
  s: Pick<SessionRecord, 'id' | 'ownerId'>,
): Promise<SessionRecord[]> {
  const rows = await q.all(
    `SELECT * FROM gw_sessions WHERE owner_id = ? AND ${contains(q)}(path, ?) > 0 AND id <> ?
     ORDER BY depth, created_at, id`,
    [s.ownerId, `/${s.id}/`, s.id],
  );
  return rows.map(toSession);
}

/**
 * Marks every session past `expiresAt` expired (spec §3 last row) and returns those this call
 * ended, so exactly one instance emits session.expired for each.
 */
export async function expireDue(q: SqlDatabase, now: number, effect?: TxEffect<string[]>): Promise<string[]> {
  return changeWith(
    q,
    async (t) => {
      const due = await t.all<{ id: string }>(
        `SELECT id FROM gw_sessions WHERE state IN ('active', 'paused') AND expires_at <= ` +
          `? ORDER BY expires_at LIMIT 500${forUpdate(t)}`,
        [now],
      );
      const ended: string[] = [];
      for (const { id } of due) {
        const r = await t.run(
          `UPDATE gw_sessions SET state = 'expired', ended_at = ?, continuation_nonce = NULL ` +
            `WHERE id = ? AND state IN ('active', 'paused')`,
          [now, id],
        );
        if (r.changes === 1) ended.push(id);
      }
      return ended;
    },
    effect,
  );
}

/** The earliest expiry of a live session, for the expiry timer. */
export async function nextExpiry(q: SqlExecutor): Promise<number | undefined> {
  const r = await q.get<{ e: unknown }>(
    `SELECT MIN(expires_at) AS e FROM gw_sessions WHERE state IN ('active', 'paused')`,
  );
  return r?.e == null ? undefined : Number(r.e);
}

/**
 * Single-use continuation (spec §3 paused row, §5): the UPDATE matches only while the session is
 * paused with this nonce, and clears the nonce, so a token used twice succeeds once.
 */
export async function continueSession(
  q: SqlExecutor,
  p: { id: string; nonce: string; oldCeiling: bigint; newCeiling: bigint; grant: PolicyGrant; now: number },
): Promise<boolean> {
  const r = await q.run(
    `UPDATE gw_sessions SET state = 'active', ceiling = ?, continuation_nonce = NULL, grant_json = ?
     WHERE id = ? AND state = 'paused' AND continuation_nonce = ? AND ceiling = ? AND expires_at > ?`,
    [p.newCeiling, JSON.stringify(p.grant), p.id, p.nonce, p.oldCeiling, p.now],
  );
  return r.changes === 1;
}

/**
 * Continues a session a window's soft limit paused (PROTOCOL.md §8, §13): that window's row is
 * raised by `raise` and the session is active again, single-use like continueSession.
 */
export async function continueWindow(
  q: SqlExecutor,
  p: { id: string; nonce: string; window: PausedWindow; raise: bigint; now: number },
): Promise<boolean> {
  const r = await q.run(
    `UPDATE gw_sessions SET state = 'active', continuation_nonce = NULL, paused_window = NULL
     WHERE id = ? AND state = 'paused' AND continuation_nonce = ? AND expires_at > ?`,
    [p.id, p.nonce, p.now],
  );
  if (r.changes !== 1) return false;
  await q.run(
    `UPDATE gw_session_windows SET max_amount = max_amount + ? WHERE session_id = ? AND every = ? AND starts_at = ?`,
    [p.raise, p.id, p.window.every, p.window.startsAt],
  );
  return true;
}

/** Up to 500 sessions whose actor key is still a PEM in the clear (from before derivation), by id. */
export async function clearActorKeys(db: SqlDatabase): Promise<{ id: string; actor_key_pem: string }[]> {
  return await db.all<{ id: string; actor_key_pem: string }>(
    `SELECT id, actor_key_pem FROM gw_sessions WHERE actor_key_pem LIKE '-----BEGIN%' ORDER BY id LIMIT 500`,
  );
}

/** Replaces a session's stored actor key if it is still `from` (sealing one found in the clear). */
export async function replaceActorKey(db: SqlDatabase, id: string, from: string, to: string): Promise<void> {
  await db.run(`UPDATE gw_sessions SET actor_key_pem = ? WHERE id = ? AND actor_key_pem = ?`, [to, id, from]);
}
