/** The top of a session's page: breadcrumb, label and state, and the owner's buttons (approve, revoke). */
import { h } from '../../dom.js';
import type { SessionView } from '../../api.js';
import { stateBadge } from '../../components.js';
import { heading } from '../../page.js';
import { approveDialog } from './approve.js';
import { revokeDialog } from './revoke.js';

/** `reload`: the page's load, for the dialogs to show what they changed. */
export function sessionHead(s: SessionView, labels: Map<string, string>, reload: () => Promise<void>) {
  return [
    h(
      'div',
      null,
      h(
        'nav',
        { 'aria-label': 'Breadcrumb', class: 'crumbs' },
        h('a', { href: '#/sessions' }, 'Sessions'),
        ' › ',
        s.label || s.sessionId,
      ),
      h(
        'div',
        { class: 'title-row' },
        heading(s.label || '(no label)'),
        stateBadge(s.state, s.stateFrom && (labels.get(s.stateFrom) ?? s.stateFrom)),
      ),
    ),
    h('div', { class: 'actions' }, ...actionButtons(s, reload)),
  ];
}

/** Approve only with a continuation token to spend; revoke while the session can still pay. */
function actionButtons(s: SessionView, reload: () => Promise<void>): HTMLElement[] {
  const out: HTMLElement[] = [];
  if (s.state === 'paused' && s.continuationToken) {
    const b = h('button', { type: 'button', class: 'btn primary', 'data-action': 'continue' }, 'Approve continuation…');
    b.addEventListener('click', () => approveDialog(s, reload));
    out.push(b);
  }
  if (s.state === 'active' || s.state === 'paused') {
    const b = h('button', { type: 'button', class: 'btn danger', 'data-action': 'revoke' }, 'Revoke session…');
    b.addEventListener('click', () => revokeDialog(s, reload));
    out.push(b);
  }
  return out;
}
