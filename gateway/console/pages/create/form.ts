/**
 * The create form's markup: three fieldsets (budget, limits, budget windows) and the buttons, in
 * the order a person fills them in. What each field accepts is checked in validate.ts.
 */
import { h } from '../../dom.js';
import { WINDOW_PERIODS, type WindowPeriod } from '../../../../src/index.js';
import type { FieldMaker } from './fields.js';

/** The periods a window may have (PROTOCOL.md §13), as the form names them: every one named. */
const PERIOD_NAMES: Record<WindowPeriod, string> = { PT1H: 'hour', P1D: 'day', P7D: 'week', P1M: 'month', P1Y: 'year' };
export const PERIODS = WINDOW_PERIODS.map((every) => [every, PERIOD_NAMES[every]] as const);

export function createForm(field: FieldMaker, formError: HTMLElement, submit: HTMLButtonElement) {
  return h(
    'form',
    { class: 'card form', novalidate: true, 'aria-labelledby': 'create-h' },
    formError,
    budgetFieldset(field),
    limitsFieldset(field),
    windowsFieldset(field),
    h('div', { class: 'actions' }, h('a', { href: '#/sessions', class: 'btn' }, 'Cancel'), submit),
  );
}

/** What the session may spend, in what, on what, and for how long. */
function budgetFieldset(field: FieldMaker) {
  return h(
    'fieldset',
    null,
    h('legend', null, 'Budget'),
    h(
      'div',
      { class: 'row' },
      field('label', 'Label', { autocomplete: 'off', maxlength: '200' }, 'Who or what spends: “Research agent, Q3”.'),
      field(
        'currency',
        'Currency',
        { value: 'USD', autocomplete: 'off', maxlength: '12', class: 'short' },
        'ISO code such as USD, or an asset such as USDC.',
      ),
      field(
        'amount',
        'Ceiling',
        { inputmode: 'decimal', autocomplete: 'off', required: 'true', class: 'short' },
        'In the currency’s units, e.g. 250.00.',
      ),
    ),
    h(
      'div',
      { class: 'row' },
      field(
        'purposes',
        'Purposes',
        { autocomplete: 'off', required: 'true', placeholder: 'api:search, data:*' },
        'Comma-separated <domain>:<kind>; <domain>:* allows every kind.',
      ),
      field(
        'expiresIn',
        'Expires after (hours)',
        { inputmode: 'decimal', value: '24', class: 'short' },
        'From now; up to the gateway’s limit.',
      ),
    ),
  );
}

/** The optional limits: soft limit, velocity, merchants, alerts and the webhook. */
function limitsFieldset(field: FieldMaker) {
  const short = (inputmode: string) => ({ inputmode, autocomplete: 'off', class: 'short' });
  return h(
    'fieldset',
    null,
    h('legend', null, 'Limits (optional)'),
    h(
      'div',
      { class: 'row' },
      field(
        'softLimit',
        'Soft limit step',
        short('decimal'),
        'Pause at the ceiling and ask you, instead of refusing; each approval adds up to this.',
      ),
      field('maxPaymentsPerHour', 'Max payments per hour', short('numeric')),
      field('maxAmountPerMerchantPerDay', 'Max per merchant per day', short('decimal')),
    ),
    h(
      'div',
      { class: 'row' },
      field(
        'merchantAllowlist',
        'Merchants allowed',
        { placeholder: '*.example.com' },
        'Host globs, one per line or comma-separated; empty allows any.',
        true,
      ),
      field(
        'merchantBlocklist',
        'Merchants blocked',
        { placeholder: 'ads.example.com' },
        'Host globs; the blocklist wins.',
        true,
      ),
    ),
    h(
      'div',
      { class: 'row' },
      field('thresholds', 'Alert at (% of ceiling)', {
        autocomplete: 'off',
        placeholder: '50, 80, 100',
        class: 'short',
      }),
      field(
        'webhookUrl',
        'Webhook URL',
        { type: 'url', autocomplete: 'off', placeholder: 'https://ops.example.com/ctl' },
        'Signed events: payments, pauses, revocation.',
      ),
    ),
  );
}

/** A limit per period beside the ceiling (PROTOCOL.md §13), and when the windows start. */
function windowsFieldset(field: FieldMaker) {
  const short = (inputmode: string) => ({ inputmode, autocomplete: 'off', class: 'short' });
  return h(
    'fieldset',
    null,
    h('legend', null, 'Budget windows (optional)'),
    h(
      'p',
      { class: 'help' },
      'A limit per hour, day, week, month or year beside the ceiling (at most four). Windows are fixed, ' +
        'counted from the start below; a payment that does not fit waits for the next window.',
    ),
    ...PERIODS.map(([every, name]) =>
      h(
        'div',
        { class: 'row' },
        field(`window-${every}`, `Per ${name}`, short('decimal')),
        field(`windowPayments-${every}`, `Payments per ${name}`, short('numeric')),
      ),
    ),
    h(
      'div',
      { class: 'row' },
      field(
        'windowsStart',
        'Windows start',
        { autocomplete: 'off', placeholder: '2026-11-26T23:00:00Z' },
        'UTC, e.g. local midnight written in UTC; empty: now.',
      ),
    ),
  );
}
