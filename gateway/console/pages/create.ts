/**
 * Create a session (POST /sessions): amounts typed in major units and sent as minor-unit strings,
 * every problem named next to its field (the gateway's own `field: reason` messages land on the
 * field they name), and the session token shown once with a copy button.
 */
import { h, clear, formatMoney, formatTime, toMinor, currencyDigits } from '../dom.js';
import { createSession, ApiError } from '../api.js';
import { heading, type Page } from '../page.js';
import { WINDOW_PERIODS, type WindowPeriod } from '../../../src/index.js';

interface Field {
  name: string;
  label: string;
  help?: string;
  input: HTMLInputElement | HTMLTextAreaElement;
  error: HTMLElement;
}

export function createPage(o: { created: (id: string, label: string) => void }): Page {
  const fields = new Map<string, Field>();
  const field = (name: string, label: string, attrs: Record<string, string>, help?: string, multiline = false) => {
    const id = `f-${name}`;
    const input = multiline ? h('textarea', { id, name, rows: '2', ...attrs }) : h('input', { id, name, ...attrs });
    const error = h('p', { id: `${id}-error`, class: 'field-error' });
    input.setAttribute('aria-describedby', `${id}-help ${id}-error`);
    fields.set(name, { name, label, help, input, error });
    return h(
      'div',
      { class: 'field' },
      h('label', { for: id }, label),
      input,
      h('p', { id: `${id}-help`, class: 'help' }, help ?? ''),
      error,
    );
  };
  const formError = h('div', { role: 'alert', class: 'form-error' });
  const submit = h('button', { type: 'submit', class: 'btn primary' }, 'Create session');
  const form = h(
    'form',
    { class: 'card form', novalidate: true, 'aria-labelledby': 'create-h' },
    formError,
    h(
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
    ),
    h(
      'fieldset',
      null,
      h('legend', null, 'Limits (optional)'),
      h(
        'div',
        { class: 'row' },
        field(
          'softLimit',
          'Soft limit step',
          { inputmode: 'decimal', autocomplete: 'off', class: 'short' },
          'Pause at the ceiling and ask you, instead of refusing; each approval adds up to this.',
        ),
        field('maxPaymentsPerHour', 'Max payments per hour', {
          inputmode: 'numeric',
          autocomplete: 'off',
          class: 'short',
        }),
        field('maxAmountPerMerchantPerDay', 'Max per merchant per day', {
          inputmode: 'decimal',
          autocomplete: 'off',
          class: 'short',
        }),
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
    ),
    h(
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
          field(`window-${every}`, `Per ${name}`, { inputmode: 'decimal', autocomplete: 'off', class: 'short' }),
          field(`windowPayments-${every}`, `Payments per ${name}`, {
            inputmode: 'numeric',
            autocomplete: 'off',
            class: 'short',
          }),
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
    ),
    h('div', { class: 'actions' }, h('a', { href: '#/sessions', class: 'btn' }, 'Cancel'), submit),
  );
  const el = h(
    'div',
    { class: 'page' },
    h(
      'div',
      { class: 'page-head' },
      h(
        'div',
        null,
        h('nav', { 'aria-label': 'Breadcrumb', class: 'crumbs' }, h('a', { href: '#/sessions' }, 'Sessions'), ' › new'),
        heading('New session'),
      ),
    ),
    form,
  );
  (form.querySelector('h1') ?? el.querySelector('h1'))?.setAttribute('id', 'create-h');

  const val = (n: string) => fields.get(n)!.input.value.trim();
  const splitList = (t: string) =>
    t
      .split(/[\s,]+/)
      .map((x) => x.trim())
      .filter(Boolean);

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    for (const f of fields.values()) {
      f.error.textContent = '';
      f.input.removeAttribute('aria-invalid');
    }
    formError.textContent = '';
    const problems: [string, string][] = [];
    const currency = val('currency').toUpperCase();
    if (!/^[A-Z0-9]{3,12}$/.test(currency))
      problems.push(['currency', 'a code of 3–12 letters or digits, such as USD']);
    const digits = currencyDigits(currency);
    const money = (name: string, required: boolean) => {
      const t = val(name);
      if (!t) {
        if (required) problems.push([name, 'required']);
        return undefined;
      }
      const m = toMinor(t, digits);
      if ('error' in m) problems.push([name, m.error]);
      else if (m.minor === '0') problems.push([name, 'must be more than zero']);
      else return m.minor;
      return undefined;
    };
    const amount = money('amount', true);
    const purposes = splitList(val('purposes'));
    if (purposes.length === 0) problems.push(['purposes', 'at least one, such as api:search']);
    else
      for (const p of purposes)
        if (!/^[a-z0-9][a-z0-9._-]{0,62}:([a-z0-9][a-z0-9._-]{0,62}|\*)$/.test(p))
          problems.push(['purposes', `“${p}” is not <domain>:<kind> in lower case`]);
    const hours = Number(val('expiresIn'));
    if (!(hours > 0) || hours > 24 * 366) problems.push(['expiresIn', 'a number of hours greater than 0']);
    const soft = money('softLimit', false);
    const perMerchant = money('maxAmountPerMerchantPerDay', false);
    const perHourText = val('maxPaymentsPerHour');
    if (perHourText && !/^[1-9]\d{0,8}$/.test(perHourText))
      problems.push(['maxPaymentsPerHour', 'a whole number of at least 1']);
    const windows: Record<string, unknown>[] = [];
    for (const [every] of PERIODS) {
      const max = money(`window-${every}`, false);
      const count = val(`windowPayments-${every}`);
      if (count && !/^[1-9]\d{0,8}$/.test(count))
        problems.push([`windowPayments-${every}`, 'a whole number of at least 1']);
      else if (count && !max) problems.push([`window-${every}`, 'required with a number of payments']);
      if (max && amount && BigInt(max) > BigInt(amount)) problems.push([`window-${every}`, 'at most the ceiling']);
      if (max) windows.push({ every, maxAmountMinor: max, ...(count ? { maxPayments: Number(count) } : {}) });
    }
    if (windows.length > 4) problems.push([`window-${windows[4]!.every}`, 'at most four windows']);
    const windowsStart = val('windowsStart');
    if (windowsStart && !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/.test(windowsStart))
      problems.push(['windowsStart', 'a UTC time such as 2026-11-26T23:00:00Z']);
    else if (windowsStart && !windows.length) problems.push(['windowsStart', 'only with a window']);
    const thresholds = splitList(val('thresholds')).map(Number);
    if (thresholds.some((t) => !Number.isInteger(t) || t < 1 || t > 100))
      problems.push(['thresholds', 'whole percentages from 1 to 100']);
    if (problems.length) return show(problems);

    const expiresAt = new Date(Date.now() + hours * 3600_000).toISOString().replace(/\.\d+Z$/, 'Z');
    const config: Record<string, unknown> = { budget: { amount, currency }, purposes, expiresAt };
    if (val('label')) config.label = val('label');
    if (soft) config.softLimit = { amount: soft };
    const velocity: Record<string, unknown> = {};
    if (perHourText) velocity.maxPaymentsPerHour = Number(perHourText);
    if (perMerchant) velocity.maxAmountPerMerchantPerDay = perMerchant;
    if (Object.keys(velocity).length) config.velocity = velocity;
    const allow = splitList(val('merchantAllowlist'));
    const block = splitList(val('merchantBlocklist'));
    if (allow.length) config.merchantAllowlist = allow;
    if (block.length) config.merchantBlocklist = block;
    if (thresholds.length) config.thresholds = thresholds;
    if (windows.length) config.windows = windows;
    if (windowsStart) config.windowsStart = windowsStart;
    if (val('webhookUrl')) config.webhookUrl = val('webhookUrl');

    submit.disabled = true;
    try {
      const res = await createSession(config);
      showCreated(res, config);
    } catch (err) {
      const ae = err as ApiError;
      // The gateway names the field first ("budget.amount: …", "purposes[1]: …").
      const m = /^([A-Za-z.[\]0-9]+): (.*)$/.exec(ae.message);
      const name = m ? fieldOf(m[1]!, windows) : undefined;
      if (name && fields.has(name)) show([[name, m![2]!]]);
      else formError.textContent = `The gateway refused this session: ${ae.message} (${ae.code}).`;
    } finally {
      submit.disabled = false;
    }
  });

  function show(problems: [string, string][]) {
    for (const [name, msg] of problems) {
      const f = fields.get(name)!;
      if (f.error.textContent) continue;
      f.error.textContent = `${f.label}: ${msg}.`;
      f.input.setAttribute('aria-invalid', 'true');
    }
    formError.textContent =
      `Please correct ${problems.length === 1 ? 'one field' : `${new Set(problems.map((p) => p[0])).size} fields`}: ` +
      'each problem is named under its field.';
    fields.get(problems[0]![0])!.input.focus();
  }

  function showCreated(
    res: { sessionToken: string; sessionId: string; expiresAt: string; webhookSecret?: string },
    config: Record<string, unknown>,
  ) {
    const b = config.budget as { amount: string; currency: string };
    const secret = (label: string, value: string, id: string) => {
      const out = h('input', { id, readonly: true, value, class: 'mono secret', 'aria-describedby': 'once' });
      const copy = h('button', { type: 'button', class: 'btn' }, `Copy ${label.toLowerCase()}`);
      const done = h('span', { role: 'status', class: 'muted' });
      copy.addEventListener('click', async () => {
        try {
          await navigator.clipboard.writeText(value);
          done.textContent = 'Copied.';
        } catch {
          out.select();
          done.textContent = 'Select the text and copy it (the browser refused clipboard access).';
        }
      });
      out.addEventListener('focus', () => out.select());
      return h(
        'div',
        { class: 'field' },
        h('label', { for: id }, label),
        h('div', { class: 'copy-row' }, out, copy),
        done,
      );
    };
    const label = String(config.label ?? '');
    clear(
      el,
      h('div', { class: 'page-head' }, heading('Session created')),
      h(
        'section',
        { class: 'card stack' },
        h(
          'p',
          null,
          h('strong', null, label || res.sessionId),
          ` may spend up to ${formatMoney(b.amount, b.currency)} until ${formatTime(res.expiresAt)}.`,
        ),
        h(
          'p',
          { id: 'once', class: 'callout warn' },
          h('strong', null, 'Shown once. '),
          'Give this token to the agent now (its secret store). The gateway keeps only a hash: ' +
            'it cannot show it again. If it is lost, revoke the session and create another.',
        ),
        secret('Session token', res.sessionToken, 'token'),
        res.webhookSecret ? secret('Webhook secret', res.webhookSecret, 'whsec') : null,
        h(
          'div',
          { class: 'actions' },
          h('a', { class: 'btn primary', href: `#/sessions/${res.sessionId}` }, 'Open the session'),
          h('a', { class: 'btn', href: '#/sessions' }, 'Back to sessions'),
        ),
      ),
    );
    o.created(res.sessionId, label);
    (el.querySelector('h1') as HTMLElement).focus();
  }

  return { title: 'New session', el };
}

/** The periods a window may have (PROTOCOL.md §13), as the form names them: every one named. */
const PERIOD_NAMES: Record<WindowPeriod, string> = { PT1H: 'hour', P1D: 'day', P7D: 'week', P1M: 'month', P1Y: 'year' };
const PERIODS = WINDOW_PERIODS.map((every) => [every, PERIOD_NAMES[every]] as const);

/** The form field a gateway message names ("budget.amount" → amount; "windows[1]…" → the second window sent). */
function fieldOf(path: string, windows: Record<string, unknown>[]): string | undefined {
  const w = /^windows\[(\d+)\](\.maxPayments)?/.exec(path);
  if (w) return `${w[2] ? 'windowPayments' : 'window'}-${windows[Number(w[1])]?.every}`;
  const root = path.replace(/\[\d+\]$/, '');
  const map: Record<string, string> = {
    'budget.amount': 'amount',
    'budget.currency': 'currency',
    budget: 'amount',
    purposes: 'purposes',
    expiresAt: 'expiresIn',
    label: 'label',
    'softLimit.amount': 'softLimit',
    softLimit: 'softLimit',
    'velocity.maxPaymentsPerHour': 'maxPaymentsPerHour',
    'velocity.maxAmountPerMerchantPerDay': 'maxAmountPerMerchantPerDay',
    merchantAllowlist: 'merchantAllowlist',
    merchantBlocklist: 'merchantBlocklist',
    thresholds: 'thresholds',
    webhookUrl: 'webhookUrl',
    windowsStart: 'windowsStart',
  };
  return map[root];
}
