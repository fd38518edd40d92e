/**
 * The sessions table: one row per session with its state, spend bar, remaining budget and expiry
 * countdown; children indented below their parent (PROTOCOL.md §14).
 */
import { h, formatRemainingBudget, formatTime } from '../../dom.js';
import type { SessionView } from '../../api.js';
import { gridTable } from '../../page.js';
import { stateBadge } from '../../components.js';
import type { Filter } from './filters.js';

/** `shown`: the filtered sessions; `total`: how many are loaded, for the empty message. */
export function sessionsTable(shown: SessionView[], filter: Filter, total: number, labels: Map<string, string>) {
  const rows = asTree(shown);
  return rows.length === 0
    ? h(
        'p',
        { class: 'empty' },
        total === 0 ? 'No sessions yet. Create one to give an agent a budget.' : `No ${filter} sessions.`,
      )
    : gridTable(
        ['Session', 'State', 'Spend', 'Remaining', 'Expires', 'Created'],
        rows.map((r) => sessionRow(r, labels)),
        { class: 'grid stackable', caption: `Sessions (${filter})` },
      );
}

function sessionRow({ s, level }: { s: SessionView; level: number }, labels: Map<string, string>) {
  const parent = s.parentId ? (labels.get(s.parentId) ?? s.parentId) : undefined;
  return h(
    'tr',
    {
      'data-session': s.sessionId,
      'data-parent': s.parentId,
      class: level ? `child level-${Math.min(level, 4)}` : undefined,
    },
    h(
      'th',
      { scope: 'row' },
      level ? h('span', { class: 'tree-mark', 'aria-hidden': 'true' }, '↳ ') : null,
      h('a', { href: `#/sessions/${s.sessionId}` }, s.label || '(no label)'),
      h('div', { class: 'mono muted' }, s.sessionId),
      s.parentId
        ? h('div', { class: 'muted parent-of' }, 'child of ', h('a', { href: `#/sessions/${s.parentId}` }, parent!))
        : null,
    ),
    // data-label: the column's name, shown beside the value where the table is stacked (a phone).
    h('td', { 'data-label': 'State' }, stateBadge(s.state, s.stateFrom && (labels.get(s.stateFrom) ?? s.stateFrom))),
    h(
      'td',
      { class: 'spend-cell', 'data-label': 'Spend' },
      h('ctl-spend-bar', {
        spent: s.spentMinor,
        reserved: s.reservedMinor,
        ceiling: s.budget.amount,
        currency: s.budget.currency,
        state: s.state,
      }),
    ),
    h(
      'td',
      { class: 'num remaining', 'data-label': 'Remaining' },
      formatRemainingBudget(s.state, s.remainingMinor, s.budget.currency),
    ),
    h('td', { 'data-label': 'Expires' }, h('ctl-countdown', { at: s.expiresAt, state: s.state })),
    h('td', { class: 'muted', 'data-label': 'Created' }, formatTime(s.createdAt)),
  );
}

/**
 * The sessions in tree order: each below its parent when the parent is shown (depth first, in the
 * list's order), the others at the top level; `level` is the indentation.
 */
function asTree(list: SessionView[]): { s: SessionView; level: number }[] {
  const ids = new Set(list.map((s) => s.sessionId));
  const below = new Map<string, SessionView[]>();
  for (const s of list)
    if (s.parentId && ids.has(s.parentId)) below.set(s.parentId, [...(below.get(s.parentId) ?? []), s]);
  const out: { s: SessionView; level: number }[] = [];
  const visit = (s: SessionView, level: number) => {
    out.push({ s, level });
    for (const c of below.get(s.sessionId) ?? []) visit(c, level + 1);
  };
  for (const s of list) if (!s.parentId || !ids.has(s.parentId)) visit(s, 0);
  return out;
}
