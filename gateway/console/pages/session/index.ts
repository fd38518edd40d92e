/**
 * One session: what it may spend and on what, what it has spent (chart and signed receipts with
 * their check marks), its webhook deliveries, and the owner's two buttons: approve a paused
 * session's continuation, revoke. This module loads and lays out; each card is its own module.
 */
import { h, clear } from '../../dom.js';
import {
  getSession,
  treeOf,
  receiptsOf,
  dispatchesOf,
  type SessionDetail,
  type SessionTree,
  type Receipt,
  type Dispatch,
} from '../../api.js';
import { heading, errorBox, debounce, keepFocus, type Page } from '../../page.js';
import type { LiveEvent } from '../../live.js';
import { sessionHead } from './head.js';
import { stateCallouts } from './callouts.js';
import { spendCards, spendChartCard } from './spend.js';
import { windowsCard } from './windows.js';
import { treeCard, treeIds } from './tree.js';
import { boundsCard } from './bounds.js';
import { receiptsCard } from './receipts.js';
import { webhooksCard } from './webhooks.js';

export { checkOf, checkMark } from './check.js';

interface Loaded {
  s: SessionDetail;
  receipts: Receipt[];
  dispatches: Dispatch[];
  tree: SessionTree;
}

export function sessionPage(id: string, o: { labels: Map<string, string> }): Page {
  const head = h('div', { class: 'page-head' });
  const body = h('div', { class: 'detail' }, h('p', { class: 'muted' }, 'Loading…'));
  const status = h('p', { class: 'visually-hidden', role: 'status' });
  let current: SessionDetail | undefined;
  /** The sessions whose events change this page: its tree, its parent, the ancestor it takes its state from. */
  let related = new Set<string>([id]);

  async function load() {
    let d: Loaded;
    try {
      d = await fetchSession(id);
    } catch (e) {
      clear(head, heading('Session'));
      clear(body, errorBox(e), h('p', null, h('a', { href: '#/sessions' }, 'Back to sessions')));
      return;
    }
    const { s, tree } = d;
    const changed = current && current.state !== s.state;
    current = s;
    related = new Set([...treeIds(tree), ...(s.parentId ? [s.parentId] : []), ...(s.stateFrom ? [s.stateFrom] : [])]);
    rememberLabels(tree, o.labels);
    document.title = `${s.label || s.sessionId} · CTL console`;
    keepFocus(page, () => render(d, changed));
  }

  function render({ s, receipts, dispatches, tree }: Loaded, changed: boolean | undefined) {
    clear(head, ...sessionHead(s, o.labels, load));
    if (changed) status.textContent = `Session is now ${s.state}.`;
    const below = receipts.some((r) => r.sessionId !== s.sessionId);
    const label = (sid: string) => o.labels.get(sid) || sid;
    clear(
      body,
      ...stateCallouts(s, label),
      spendCards(s),
      s.windows ? windowsCard(s.windows, s.budget.currency, s.state) : null,
      tree.children.length || s.parentId ? treeCard(tree, s, label) : null,
      boundsCard(s),
      spendChartCard(s, receipts, below),
      receiptsCard(s, receipts, below, label),
      webhooksCard(s, dispatches),
    );
  }

  const reload = debounce(() => void load(), 300);
  const page = h('div', { class: 'page' }, head, status, body);
  void load();
  return {
    title: 'Session',
    el: page,
    refresh: load,
    // A change of a session it does not know yet (an ancestor pausing) may change its state too.
    onLive: (e: LiveEvent) => {
      if (related.has(e.sessionId) || /^session\.(paused|continued|revoked|expired)$/.test(e.type)) reload();
    },
  };
}

/** The session, its receipts, webhook deliveries and tree, read together. */
async function fetchSession(id: string): Promise<Loaded> {
  // The receipts of the sessions below it too: its spend counts them (PROTOCOL.md §14).
  const [s, { receipts }, { dispatches }, tree] = await Promise.all([
    getSession(id),
    receiptsOf(id, true),
    dispatchesOf(id),
    treeOf(id),
  ]);
  return { s, receipts, dispatches, tree };
}

/** Every label of the tree, for the links and badges of this page and the others. */
function rememberLabels(n: SessionTree, labels: Map<string, string>) {
  labels.set(n.session.sessionId, n.session.label);
  n.children.forEach((c) => rememberLabels(c, labels));
}
