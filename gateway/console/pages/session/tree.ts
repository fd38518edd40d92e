/** The session's place in its tree of child sessions (PROTOCOL.md §14), each node with its spend. */
import { h } from '../../dom.js';
import type { SessionDetail, SessionTree } from '../../api.js';
import { stateBadge } from '../../components.js';

export function treeCard(tree: SessionTree, s: SessionDetail, label: (id: string) => string) {
  return h(
    'section',
    { class: 'card', 'aria-labelledby': 'tree-h' },
    h('h2', { id: 'tree-h' }, 'Child sessions'),
    s.parentId
      ? h('p', null, 'A child of ', h('a', { href: `#/sessions/${s.parentId}` }, label(s.parentId)), '.')
      : null,
    h('ul', { class: 'tree' }, treeNode(tree, s.sessionId, label)),
  );
}

/** One node and the nodes below it; the page's own session is named, not linked. */
function treeNode(n: SessionTree, self: string, label: (id: string) => string): HTMLElement {
  const name = n.session.label || n.session.sessionId;
  return h(
    'li',
    { 'data-tree-session': n.session.sessionId },
    h(
      'div',
      { class: 'tree-node' },
      n.session.sessionId === self
        ? h('strong', null, name)
        : h('a', { href: `#/sessions/${n.session.sessionId}` }, name),
      ' ',
      stateBadge(n.session.state, n.session.stateFrom && label(n.session.stateFrom)),
      h('ctl-spend-bar', {
        spent: n.session.spentMinor,
        reserved: n.session.reservedMinor,
        ceiling: n.session.budget.amount,
        currency: n.session.budget.currency,
        state: n.session.state,
        compact: '',
      }),
    ),
    n.children.length ? h('ul', { class: 'tree' }, ...n.children.map((c) => treeNode(c, self, label))) : null,
  );
}

/** Every session id of a tree. */
export function treeIds(n: SessionTree): string[] {
  return [n.session.sessionId, ...n.children.flatMap(treeIds)];
}
