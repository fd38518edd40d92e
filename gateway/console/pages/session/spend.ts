/** A session's spend: the ceiling and expiry cards at the top, and the spend over time below the bounds. */
import { h, formatMoney, formatRemainingBudget, formatTime } from '../../dom.js';
import type { Receipt, SessionDetail } from '../../api.js';
import { spendChart } from '../../chart.js';
import { dt } from './terms.js';

/** Spent, reserved and remaining of the ceiling, beside when the session ends. */
export function spendCards(s: SessionDetail) {
  const cur = s.budget.currency;
  const money = (m: string) => formatMoney(m, cur);
  return h(
    'div',
    { class: 'cards' },
    h(
      'section',
      { class: 'card', 'aria-labelledby': 'spend-h' },
      h('h2', { id: 'spend-h' }, 'Spend'),
      h('ctl-spend-bar', {
        spent: s.spentMinor,
        reserved: s.reservedMinor,
        ceiling: s.budget.amount,
        currency: cur,
        state: s.state,
        class: 'large',
      }),
      h(
        'dl',
        { class: 'figures' },
        dt('Ceiling', money(s.budget.amount)),
        dt('Spent', money(s.spentMinor)),
        dt('Reserved', money(s.reservedMinor)),
        dt('Remaining', formatRemainingBudget(s.state, s.remainingMinor, cur)),
      ),
    ),
    h(
      'section',
      { class: 'card', 'aria-labelledby': 'exp-h' },
      h('h2', { id: 'exp-h' }, 'Expiry'),
      h('p', { class: 'big' }, h('ctl-countdown', { at: s.expiresAt, state: s.state })),
      h('dl', { class: 'figures' }, dt('Expires', formatTime(s.expiresAt)), dt('Created', formatTime(s.createdAt))),
    ),
  );
}

/** The chart of cumulative spend; `below`: the receipts include those of sessions below it. */
export function spendChartCard(s: SessionDetail, receipts: Receipt[], below: boolean) {
  return h(
    'section',
    { class: 'card', 'aria-labelledby': 'chart-h' },
    h('h2', { id: 'chart-h' }, 'Spend over time'),
    spendChart(receipts, s.budget.amount, s.budget.currency, s.createdAt),
    below ? h('p', { class: 'muted' }, 'With the payments of the sessions below it, which its spend counts.') : null,
  );
}
