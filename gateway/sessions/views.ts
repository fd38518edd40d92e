/**
 * What the owner and the agent read of a session (spec §3, PROTOCOL.md §13): the view hides the
 * secrets, shows the state its payments meet (states.ts heldBy) and each window's standing.
 */
import { formatTimestamp } from '../../src/index.js';
import type { SqlDatabase } from '../../service-kit/index.js';
import { effectiveState, type CurrentWindows, type SessionRecord } from './store.js';
import { heldBy, type Held } from './states.js';
import { continuationToken } from './continuation.js';

/**
 * The views of sessions, over `deps.currentWindows` (the money store's reader, handed in by the
 * app: sessions/ does not import payments/).
 * @example const { views } = createSessionViews(deps); await views([s]) // [{ sessionId, state, … }]
 */
export function createSessionViews(deps: {
  db: SqlDatabase;
  currentWindows: CurrentWindows;
  continuationSecret: Buffer;
  now: () => number;
}) {
  const { db, now } = deps;

  /**
   * The owner's view; the continuation token only while paused. `held`: the paused or stopped
   * ancestor whose state this session's payments meet (heldBy), which is then its `state`.
   */
  function view(s: SessionRecord, held?: Held) {
    const state = held?.state ?? effectiveState(s, now());
    const c = s.config;
    const remaining = s.ceiling - s.spent - s.reserved;
    return {
      sessionId: s.id,
      label: s.label,
      state,
      budget: { amount: s.ceiling.toString(), currency: s.currency },
      purposes: c.purposes,
      ...(c.defaultPurpose ? { defaultPurpose: c.defaultPurpose } : {}),
      expiresAt: c.expiresAt,
      createdAt: formatTimestamp(s.createdAt),
      spentMinor: s.spent.toString(),
      reservedMinor: s.reserved.toString(),
      remainingMinor: (remaining > 0n ? remaining : 0n).toString(),
      merchantAllowlist: c.merchantAllowlist,
      merchantBlocklist: c.merchantBlocklist,
      ...(c.velocity ? { velocity: c.velocity } : {}),
      ...(c.softLimit ? { softLimit: c.softLimit } : {}),
      ...(c.webhookUrl ? { webhookUrl: c.webhookUrl } : {}),
      thresholds: c.thresholds,
      trustLevel: c.trustLevel,
      policyHash: s.policyHash,
      grantId: s.grantId,
      ...(s.parentId ? { parentId: s.parentId, depth: s.depth } : {}),
      ...(held ? { stateFrom: held.from } : {}),
      ...(state === 'paused' && s.pausedWindow
        ? { pausedWindow: { every: s.pausedWindow.every, resetsAt: formatTimestamp(s.pausedWindow.endsAt) } }
        : {}),
      ...(state === 'revoked' && s.revokedBy ? { revokedBy: s.revokedBy } : {}),
      ...(state === 'paused' && s.continuationNonce
        ? { continuationToken: continuationToken(deps.continuationSecret, s.id, s.continuationNonce) }
        : {}),
    };
  }

  /**
   * Each window as it stands now (PROTOCOL.md §13): its limits, what is spent and reserved in the
   * current window, and when it resets.
   */
  async function windowsOf(s: SessionRecord) {
    if (!s.config.windows?.length || s.windowsStart === null) return undefined;
    const rows = await deps.currentWindows(
      db,
      { id: s.id, windows: s.config.windows, windowsStart: s.windowsStart },
      now(),
    );
    return rows.map((w) => {
      const left = w.maxAmount - w.spent - w.reserved;
      return {
        every: w.every,
        maxAmountMinor: w.maxAmount.toString(),
        ...(w.maxPayments !== null ? { maxPayments: Number(w.maxPayments) } : {}),
        spentMinor: w.spent.toString(),
        reservedMinor: w.reserved.toString(),
        remainingMinor: (left > 0n ? left : 0n).toString(),
        payments: Number(w.payments),
        startedAt: formatTimestamp(w.startsAt),
        resetsAt: formatTimestamp(w.endsAt),
      };
    });
  }

  /** The views of `list`, each with the state its payments meet (heldBy). */
  async function views(list: SessionRecord[]) {
    const held = await heldBy(db, list, now());
    return list.map((x) => view(x, held.get(x.id)));
  }

  /** The owner's view with each window's standing (GET /sessions/{id}). */
  async function detail(s: SessionRecord) {
    const windows = await windowsOf(s);
    return { ...(await views([s]))[0]!, ...(windows ? { windows } : {}) };
  }

  /**
   * The agent's view of its own session (GET /session): the owner's view without what is the
   * owner's to hold: the continuation token (the owner's approval, spec §3 paused row) and the
   * webhook address.
   */
  async function agentView(s: SessionRecord) {
    const {
      continuationToken: _approval,
      webhookUrl: _hook,
      ...rest
    } = (await views([s]))[0]! as ReturnType<typeof view> & { continuationToken?: string; webhookUrl?: string };
    return rest;
  }

  return { view, views, detail, agentView, windowsOf };
}

/** The views of one service (createSessionViews). */
export type SessionViews = ReturnType<typeof createSessionViews>;

/** The owner's view of one session (SessionViews.view). */
export type SessionView = ReturnType<SessionViews['view']>;
