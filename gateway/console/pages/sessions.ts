/** The owner's sessions: totals, state filters, a dense table with spend bars and countdowns, recent live activity. */
import { h, clear, formatMoney, formatRemainingBudget, formatTime } from '../dom.js';
import { listSessions, type SessionView } from '../api.js';
import { stateBadge } from '../components.js';
import { heading, errorBox, debounce, keepFocus, type Page } from '../page.js';
import type { LiveEvent } from '../live.js';

const STATES = ['all', 'active', 'paused', 'revoked', 'expired'] as const;
type Filter = (typeof STATES)[number];

/** The last live events of this tab, newest first (kept across page changes). */
export const activity: LiveEvent[] = [];

export function sessionsPage(o: { filter: string | undefined; labels: Map<string, string> }): Page {
  let filter: Filter = (STATES as readonly string[]).includes(o.filter ?? '') ? (o.filter as Filter) : 'all';
  let sessions: SessionView[] = [];
  let nextCursor: string | undefined;
  const status = h('p', { class: 'visually-hidden', role: 'status' });
  const summary = h('section', { class: 'summary', 'aria-label': 'Totals' });
  const filters = h('div', { class: 'filters', role: 'group', 'aria-label': 'Filter by state' });
  const table = h('div', { class: 'table-wrap' });
  const more = h('div');
  const feed = h('ol', { class: 'feed' });

  const load = async () => {
    try {
      const page = await listSessions();
      sessions = page.sessions;
      nextCursor = page.nextCursor;
      for (const s of sessions) o.labels.set(s.sessionId, s.label);
      keepFocus(el, render);
    } catch (e) {
      clear(table, errorBox(e));
    }
  };
  const loadMore = async () => {
    if (!nextCursor) return;
    const page = await listSessions(nextCursor);
    sessions = [...sessions, ...page.sessions];
    nextCursor = page.nextCursor;
    render();
  };

  function render() {
    const count = (st: Filter) => (st === 'all' ? sessions.length : sessions.filter((s) => s.state === st).length);
    const live = sessions.filter((s) => s.state === 'active' || s.state === 'paused');
    // A child paused with its parent waits for the parent's approval, not one of its own.
    const waiting = sessions.filter((s) => s.state === 'paused' && !s.stateFrom).length;
    const loaded = new Set(sessions.map((s) => s.sessionId));
    const spentBy = new Map<string, bigint>();
    // A parent's spend counts every payment below it (PROTOCOL.md §14): a child whose parent is
    // shown is counted there. Pages come newest first, so a child's ancestors are never on a page
    // its parent is not.
    for (const s of live)
      if (!s.parentId || !loaded.has(s.parentId))
        spentBy.set(s.budget.currency, (spentBy.get(s.budget.currency) ?? 0n) + BigInt(s.spentMinor));
    clear(
      summary,
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
        [...spentBy].map(([c, v]) => formatMoney(v.toString(), c)).join(' · ') || '—',
        "active and paused; a child's spend counts in its parent's",
      ),
      tile('Sessions', String(sessions.length), nextCursor ? 'more not loaded yet' : 'all loaded'),
    );
    clear(
      filters,
      ...STATES.map((st) => {
        const b = h(
          'button',
          { type: 'button', class: 'chip', 'aria-pressed': String(filter === st), 'data-action': `filter-${st}` },
          `${st[0]!.toUpperCase()}${st.slice(1)} `,
          h('span', { class: 'count' }, String(count(st))),
        );
        b.addEventListener('click', () => {
          filter = st;
          history.replaceState(null, '', st === 'all' ? '#/sessions' : `#/sessions?state=${st}`);
          render();
          status.textContent = `${count(st)} ${st === 'all' ? '' : `${st} `}session${count(st) === 1 ? '' : 's'} shown`;
          (filters.querySelector(`[aria-pressed="true"]`) as HTMLElement | null)?.focus();
        });
        return b;
      }),
    );
    const shown = asTree(filter === 'all' ? sessions : sessions.filter((s) => s.state === filter));
    clear(
      table,
      shown.length === 0
        ? h(
            'p',
            { class: 'empty' },
            sessions.length === 0 ? 'No sessions yet. Create one to give an agent a budget.' : `No ${filter} sessions.`,
          )
        : h(
            'table',
            { class: 'grid stackable' },
            h('caption', { class: 'visually-hidden' }, `Sessions (${filter})`),
            h(
              'thead',
              null,
              h(
                'tr',
                null,
                ...['Session', 'State', 'Spend', 'Remaining', 'Expires', 'Created'].map((c) =>
                  h('th', { scope: 'col' }, c),
                ),
              ),
            ),
            h('tbody', null, ...shown.map(row)),
          ),
    );
    clear(more, nextCursor ? btn('Load more sessions', loadMore) : null);
    renderFeed();
  }

  function row({ s, level }: { s: SessionView; level: number }) {
    const parent = s.parentId ? (o.labels.get(s.parentId) ?? s.parentId) : undefined;
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
      h(
        'td',
        { 'data-label': 'State' },
        stateBadge(s.state, s.stateFrom && (o.labels.get(s.stateFrom) ?? s.stateFrom)),
      ),
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

  function renderFeed() {
    clear(
      feed,
      activity.length === 0
        ? h('li', { class: 'muted' }, 'Nothing yet: payments, refusals and state changes appear here as they happen.')
        : activity
            .slice(0, 12)
            .map((e) =>
              h(
                'li',
                { class: `ev ev-${e.type.replace(/\W/g, '-')}` },
                h('time', { datetime: e.at }, formatTime(e.at).slice(11)),
                h('span', { class: 'ev-type' }, e.type),
                h('a', { href: `#/sessions/${e.sessionId}` }, o.labels.get(e.sessionId) ?? e.sessionId),
                e.amountMinor && e.currency
                  ? h('span', { class: 'num' }, formatMoney(String(e.amountMinor), String(e.currency)))
                  : null,
                e.merchant ? h('span', { class: 'muted' }, String(e.merchant)) : null,
                e.code ? h('span', { class: 'code' }, String(e.code)) : null,
              ),
            ),
    );
  }

  // A burst of payments is one list read, not one per payment.
  const reload = debounce(() => void load(), 400);
  const el = h(
    'div',
    { class: 'page' },
    h(
      'div',
      { class: 'page-head' },
      heading('Sessions'),
      h('a', { class: 'btn primary', href: '#/new' }, 'New session'),
    ),
    summary,
    filters,
    status,
    table,
    more,
    h(
      'section',
      { class: 'card', 'aria-labelledby': 'feed-title' },
      h('h2', { id: 'feed-title' }, 'Live activity'),
      feed,
    ),
  );
  void load();
  return {
    title: 'Sessions',
    el,
    refresh: load,
    onLive: () => {
      renderFeed();
      reload();
    },
  };
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

function tile(label: string, value: string, note: string, attention = false) {
  return h(
    'div',
    { class: `tile${attention ? ' attention' : ''}` },
    h('div', { class: 'tile-label' }, label),
    h('div', { class: 'tile-value' }, value),
    h('div', { class: 'tile-note' }, note),
  );
}

function btn(text: string, f: () => Promise<void>) {
  const b = h('button', { type: 'button', class: 'btn' }, text);
  b.addEventListener('click', () => void f());
  return b;
}
