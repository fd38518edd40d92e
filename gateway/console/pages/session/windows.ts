/** A session's budget windows, each as a bar of its own with when it resets (PROTOCOL.md §13). */
import { h, formatMoney, formatTime } from '../../dom.js';
import type { SessionDetail } from '../../api.js';
import { capitalised, periodName } from './terms.js';

type Window = NonNullable<SessionDetail['windows']>[number];

export function windowsCard(windows: Window[], cur: string, state: string) {
  return h(
    'section',
    { class: 'card', 'aria-labelledby': 'windows-h' },
    h('h2', { id: 'windows-h' }, 'Windows'),
    ...windows.map((w) => windowBlock(w, cur, state)),
  );
}

function windowBlock(w: Window, cur: string, state: string) {
  return h(
    'div',
    { class: 'window', 'data-window': w.every },
    h(
      'h3',
      null,
      `${capitalised(periodName(w.every))}: ${formatMoney(w.maxAmountMinor, cur)}`,
      w.maxPayments !== undefined ? `, ${w.maxPayments} payments` : '',
    ),
    h('ctl-spend-bar', {
      spent: w.spentMinor,
      reserved: w.reservedMinor,
      ceiling: w.maxAmountMinor,
      currency: cur,
      state,
    }),
    h(
      'p',
      { class: 'muted' },
      `${w.payments} payment${w.payments === 1 ? '' : 's'} in this window · resets ${formatTime(w.resetsAt)} (`,
      h('ctl-countdown', { at: w.resetsAt, state: 'active' }),
      ')',
    ),
  );
}
