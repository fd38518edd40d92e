/**
 * The notes above a session's cards that say why it cannot pay as usual: paused, revoked or
 * expired, by itself or with the ancestor it takes its state from (PROTOCOL.md §14).
 */
import { h, formatMoney, formatTime } from '../../dom.js';
import type { SessionDetail } from '../../api.js';
import { capitalised, periodName } from './terms.js';

/** Every note that applies, in page order (null where one does not). */
export function stateCallouts(s: SessionDetail, label: (id: string) => string) {
  return [
    s.stateFrom ? inheritedCallout(s, s.stateFrom, label) : null,
    s.state === 'paused' && !s.stateFrom ? pausedCallout(s) : null,
    s.state === 'revoked' && !s.stateFrom ? revokedCallout(s) : null,
    s.state === 'expired' && !s.stateFrom ? expiredCallout(s) : null,
  ];
}

/** Paused, revoked or expired with a parent or an ancestor: where to act is that session's page. */
function inheritedCallout(s: SessionDetail, from: string, label: (id: string) => string) {
  return h(
    'div',
    { class: `callout ${s.state === 'paused' ? 'warn' : 'stop'}`, role: 'note', 'data-state-from': from },
    h('strong', null, `${capitalised(s.state)} with ${from === s.parentId ? 'its parent' : 'an ancestor'}. `),
    h('a', { href: `#/sessions/${from}` }, label(from)),
    s.state === 'paused'
      ? ' is paused: every payment of this session waits until it is continued there.'
      : ` is ${s.state}: every payment of this session is refused.`,
  );
}

/** Paused at a window's limit (PROTOCOL.md §13) or at the ceiling: what approving would do. */
function pausedCallout(s: SessionDetail) {
  const money = (m: string) => formatMoney(m, s.budget.currency);
  const step = s.softLimit ? money(s.softLimit.amount) : 'the soft limit';
  // A window that resets after the session ends never resumes payments by itself.
  const ownEnd = (at: string) => Date.parse(at) >= Date.parse(s.expiresAt);
  return h(
    'div',
    { class: 'callout warn', role: 'note' },
    ...(s.pausedWindow
      ? [
          h('strong', null, `Paused at its ${periodName(s.pausedWindow.every)} limit. `),
          ownEnd(s.pausedWindow.resetsAt)
            ? `The window resets only after the session ends (${formatTime(s.expiresAt)}): approve to ` +
              `raise this window by up to ${step}, once.`
            : `Payments resume by themselves at ${formatTime(s.pausedWindow.resetsAt)}, or approve to ` +
              `raise this window by up to ${step}, once.`,
        ]
      : [
          h('strong', null, 'Paused at its ceiling. '),
          "The agent's payments wait for you. Approving raises the ceiling by up to " + `${step}, once.`,
        ]),
  );
}

function revokedCallout(s: SessionDetail) {
  return h(
    'div',
    { class: 'callout stop', role: 'note' },
    h('strong', null, 'Revoked. '),
    `Stopped by the ${s.revokedBy ?? 'owner'}: every further payment is refused.`,
  );
}

function expiredCallout(s: SessionDetail) {
  return h(
    'div',
    { class: 'callout', role: 'note' },
    h('strong', null, 'Expired. '),
    `Ended at ${formatTime(s.expiresAt)}.`,
  );
}
