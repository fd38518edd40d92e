/** What a session may spend on: its purposes, merchants, velocity, soft limit, alerts and identifiers. */
import { h, formatMoney } from '../../dom.js';
import type { SessionDetail } from '../../api.js';
import { dt, list } from './terms.js';

export function boundsCard(s: SessionDetail) {
  const money = (m: string) => formatMoney(m, s.budget.currency);
  return h(
    'section',
    { class: 'card', 'aria-labelledby': 'bounds-h' },
    h('h2', { id: 'bounds-h' }, 'Bounds'),
    h(
      'dl',
      { class: 'bounds' },
      dt('Purposes', list(s.purposes)),
      dt('Merchants allowed', s.merchantAllowlist.length ? list(s.merchantAllowlist) : 'any merchant'),
      dt('Merchants blocked', s.merchantBlocklist.length ? list(s.merchantBlocklist) : 'none'),
      dt('Velocity', velocity(s, money)),
      dt(
        'Soft limit',
        s.softLimit
          ? `pauses at the ceiling; each approval adds up to ${money(s.softLimit.amount)}`
          : 'none: payments past the ceiling are refused',
      ),
      dt('Alerts at', s.thresholds.length ? s.thresholds.map((t) => `${t}%`).join(', ') : 'none'),
      dt('Webhook', s.webhookUrl ? h('span', { class: 'mono' }, s.webhookUrl) : 'none'),
      dt('Session id', h('span', { class: 'mono' }, s.sessionId)),
      dt('Grant id', h('span', { class: 'mono' }, s.grantId)),
      dt('Policy hash', h('span', { class: 'mono wrap' }, s.policyHash)),
    ),
  );
}

/** The velocity limits in one line, or "no limit". */
function velocity(s: SessionDetail, money: (m: string) => string) {
  return (
    [
      s.velocity?.maxPaymentsPerHour !== undefined ? `${s.velocity.maxPaymentsPerHour} payments per hour` : null,
      s.velocity?.maxAmountPerMerchantPerDay !== undefined
        ? `${money(s.velocity.maxAmountPerMerchantPerDay)} per merchant per day`
        : null,
    ]
      .filter(Boolean)
      .join('; ') || 'no limit'
  );
}
