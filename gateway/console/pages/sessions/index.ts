/**
 * The owner's sessions: totals, state filters, a dense table with spend bars and countdowns, recent
 * live activity. This module loads and keeps the list; each part is drawn by its own module.
 */
import { h, clear } from '../../dom.js';
import { listSessions, type SessionView } from '../../api.js';
import { heading, errorBox, debounce, keepFocus, type Page } from '../../page.js';
import { filterChips, filterOf, type Filter } from './filters.js';
import { summaryTiles } from './summary.js';
import { sessionsTable } from './table.js';
import { feedItems } from './feed.js';

export { activity } from './feed.js';

export function sessionsPage(o: { filter: string | undefined; labels: Map<string, string> }): Page {
  let filter: Filter = filterOf(o.filter);
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
    clear(summary, ...summaryTiles(sessions, !!nextCursor, count));
    const choose = (st: Filter) => (filter = st);
    clear(filters, ...filterChips({ container: filters, status, current: filter, count, choose, render }));
    const shown = filter === 'all' ? sessions : sessions.filter((s) => s.state === filter);
    clear(table, sessionsTable(shown, filter, sessions.length, o.labels));
    clear(more, nextCursor ? btn('Load more sessions', loadMore) : null);
    renderFeed();
  }

  function renderFeed() {
    clear(feed, feedItems(o.labels));
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

function btn(text: string, f: () => Promise<void>) {
  const b = h('button', { type: 'button', class: 'btn' }, text);
  b.addEventListener('click', () => void f());
  return b;
}
