/** The totals above the sessions list: active, paused (and how many wait for the owner), spent, loaded. */
import { h, formatMoney } from '../../dom.js';
import type { SessionView } from '../../api.js';
import type { Filter } from './filters.js';

export function summaryTiles(sessions: SessionView[], more: boolean, count: (st: Filter) => number) {
  // A child paused with its parent waits for the parent's approval, not one of its own.
  const waiting = sessions.filter((s) => s.state === 'paused' && !s.stateFrom).length;
  return [
    tile('Active', String(count('active')), 'sessions that can pay now'),
    tile(
      'Paused',
      String(count('paused')),
      waiting === 0
        ? 'none waiting'
        : `${waiting} waiting for your approval` +
            (waiting < count('paused') ? '; the others with a paused parent' : ''),
      count('paused') > 0,
    ),
    tile(
      'Spent in live sessions',
      [...liveSpend(sessions)].map(([c, v]) => formatMoney(v.toString(), c)).join(' · ') || '—',
      "active and paused; a child's spend counts in its parent's",
    ),
    tile('Sessions', String(sessions.length), more ? 'more not loaded yet' : 'all loaded'),
  ];
}

/** Spend of the active and paused sessions, per currency, each payment counted once. */
function liveSpend(sessions: SessionView[]) {
  const live = sessions.filter((s) => s.state === 'active' || s.state === 'paused');
  const loaded = new Set(sessions.map((s) => s.sessionId));
  const spentBy = new Map<string, bigint>();
  // A parent's spend counts every payment below it (PROTOCOL.md §14): a child whose parent is
  // shown is counted there. Pages come newest first, so a child's ancestors are never on a page
  // its parent is not.
  for (const s of live)
    if (!s.parentId || !loaded.has(s.parentId))
      spentBy.set(s.budget.currency, (spentBy.get(s.budget.currency) ?? 0n) + BigInt(s.spentMinor));
  return spentBy;
}

function tile(label: string, value: string, note: string, attention = false) {
  return h(
    'div',
    { class: `tile${attention ? ' attention' : ''}` },
    h('div', { class: 'tile-label' }, label),
    h('div', { class: 'tile-value' }, value),
    h('div', { class: 'tile-note' }, note),
  );
}
