/**
 * One session: what it may spend and on what, what it has spent (chart and signed receipts with
 * their check marks), its webhook deliveries, and the owner's two buttons: approve a paused
 * session's continuation, revoke.
 */
import { h, clear, formatMoney, formatRemainingBudget, formatTime, toMinor, currencyDigits } from '../dom.js';
import {
  getSession,
  treeOf,
  receiptsOf,
  dispatchesOf,
  revokeSession,
  continueSession,
  ApiError,
  type SessionView,
  type SessionDetail,
  type SessionTree,
  type Receipt,
  type Dispatch,
} from '../api.js';
import { stateBadge } from '../components.js';
import { spendChart } from '../chart.js';
import { confirmDialog } from '../dialog.js';
import { checkReceipt, type ReceiptCheck } from '../receipt-check.js';
import { canonicalize, type WindowPeriod } from '../../../src/index.js';
import { heading, errorBox, debounce, keepFocus, type Page } from '../page.js';
import type { LiveEvent } from '../live.js';

/**
 * Verification results keyed by the receipt's canonical bytes, never by its id (PROTOCOL.md §12:
 * cache the answer for bytes, not for an object): a receipt that comes back altered is checked again.
 */
const checks = new Map<string, Promise<ReceiptCheck>>();
export const checkOf = (r: Receipt) => {
  const bytes = canonicalize(r);
  let c = checks.get(bytes);
  if (!c) {
    c = checkReceipt(JSON.parse(bytes)).catch((e) => ({
      valid: false,
      method: 'error',
      keyId: r.keyId,
      message: `Could not check: ${(e as Error).message}`,
    }));
    if (checks.size >= 2000) checks.delete(checks.keys().next().value as string);
    checks.set(bytes, c);
  }
  return c;
};

export function checkMark(r: Receipt): HTMLElement {
  const el = h('span', { class: 'check pending', 'data-receipt-check': r.receiptId }, 'checking…');
  void checkOf(r).then((c) => {
    el.className = `check ${c.valid ? 'ok' : 'bad'}`;
    el.setAttribute('data-valid', String(c.valid));
    el.setAttribute('data-method', c.method);
    el.title = c.message;
    clear(
      el,
      h('span', { 'aria-hidden': 'true' }, c.valid ? '✔' : '✖'),
      ` ${c.valid ? 'verified' : 'invalid'}`,
      h('span', { class: 'visually-hidden' }, `: ${c.message}`),
    );
  });
  return el;
}

export function sessionPage(id: string, o: { labels: Map<string, string> }): Page {
  const head = h('div', { class: 'page-head' });
  const body = h('div', { class: 'detail' }, h('p', { class: 'muted' }, 'Loading…'));
  const status = h('p', { class: 'visually-hidden', role: 'status' });
  let current: SessionView | undefined;
  /** The sessions whose events change this page: its tree, its parent, the ancestor it takes its state from. */
  let related = new Set<string>([id]);

  async function load() {
    let s: SessionDetail, receipts: Receipt[], dispatches: Dispatch[], tree: SessionTree;
    try {
      // The receipts of the sessions below it too: its spend counts them (PROTOCOL.md §14).
      [s, { receipts }, { dispatches }, tree] = await Promise.all([
        getSession(id),
        receiptsOf(id, true),
        dispatchesOf(id),
        treeOf(id),
      ]);
    } catch (e) {
      clear(head, heading('Session'));
      clear(body, errorBox(e), h('p', null, h('a', { href: '#/sessions' }, 'Back to sessions')));
      return;
    }
    const changed = current && current.state !== s.state;
    current = s;
    related = new Set([...treeIds(tree), ...(s.parentId ? [s.parentId] : []), ...(s.stateFrom ? [s.stateFrom] : [])]);
    const labelsOf = (n: SessionTree) => {
      o.labels.set(n.session.sessionId, n.session.label);
      n.children.forEach(labelsOf);
    };
    labelsOf(tree);
    document.title = `${s.label || s.sessionId} · CTL console`;
    keepFocus(page, () => render(s, receipts, dispatches, tree, changed));
  }

  function render(
    s: SessionDetail,
    receipts: Receipt[],
    dispatches: Dispatch[],
    tree: SessionTree,
    changed: boolean | undefined,
  ) {
    clear(
      head,
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
          stateBadge(s.state, s.stateFrom && (o.labels.get(s.stateFrom) ?? s.stateFrom)),
        ),
      ),
      h('div', { class: 'actions' }, ...actions(s)),
    );
    if (changed) status.textContent = `Session is now ${s.state}.`;
    const cur = s.budget.currency;
    const money = (m: string) => formatMoney(m, cur);
    const below = receipts.some((r) => r.sessionId !== s.sessionId);
    const label = (sid: string) => o.labels.get(sid) || sid;
    const viaAncestor = s.stateFrom
      ? h(
          'div',
          { class: `callout ${s.state === 'paused' ? 'warn' : 'stop'}`, role: 'note', 'data-state-from': s.stateFrom },
          h(
            'strong',
            null,
            `${capitalised(s.state)} with ${s.stateFrom === s.parentId ? 'its parent' : 'an ancestor'}. `,
          ),
          h('a', { href: `#/sessions/${s.stateFrom}` }, label(s.stateFrom)),
          s.state === 'paused'
            ? ' is paused: every payment of this session waits until it is continued there.'
            : ` is ${s.state}: every payment of this session is refused.`,
        )
      : null;
    const ownEnd = (at: string) => Date.parse(at) >= Date.parse(s.expiresAt);
    clear(
      body,
      viaAncestor,
      s.state === 'paused' && !s.stateFrom
        ? h(
            'div',
            { class: 'callout warn', role: 'note' },
            ...(s.pausedWindow
              ? [
                  h('strong', null, `Paused at its ${periodName(s.pausedWindow.every)} limit. `),
                  ownEnd(s.pausedWindow.resetsAt)
                    ? `The window resets only after the session ends (${formatTime(s.expiresAt)}): approve to ` +
                      `raise this window by up to ${s.softLimit ? money(s.softLimit.amount) : 'the soft limit'}, once.`
                    : `Payments resume by themselves at ${formatTime(s.pausedWindow.resetsAt)}, or approve to ` +
                      `raise this window by up to ${s.softLimit ? money(s.softLimit.amount) : 'the soft limit'}, once.`,
                ]
              : [
                  h('strong', null, 'Paused at its ceiling. '),
                  "The agent's payments wait for you. Approving raises the ceiling by up to " +
                    `${s.softLimit ? money(s.softLimit.amount) : 'the soft limit'}, once.`,
                ]),
          )
        : null,
      s.state === 'revoked' && !s.stateFrom
        ? h(
            'div',
            { class: 'callout stop', role: 'note' },
            h('strong', null, 'Revoked. '),
            `Stopped by the ${s.revokedBy ?? 'owner'}: every further payment is refused.`,
          )
        : null,
      s.state === 'expired' && !s.stateFrom
        ? h(
            'div',
            { class: 'callout', role: 'note' },
            h('strong', null, 'Expired. '),
            `Ended at ${formatTime(s.expiresAt)}.`,
          )
        : null,
      h(
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
      ),
      s.windows ? windowsCard(s.windows, cur, s.state) : null,
      tree.children.length || s.parentId ? treeCard(tree, s, label) : null,
      h(
        'section',
        { class: 'card', 'aria-labelledby': 'bounds-h' },
        h('h2', { id: 'bounds-h' }, 'Bounds'),
        h(
          'dl',
          { class: 'bounds' },
          dt('Purposes', list(s.purposes)),
          dt('Merchants allowed', s.merchantAllowlist.length ? list(s.merchantAllowlist) : 'any merchant'),
          dt('Merchants blocked', s.merchantBlocklist.length ? list(s.merchantBlocklist) : 'none'),
          dt(
            'Velocity',
            [
              s.velocity?.maxPaymentsPerHour !== undefined
                ? `${s.velocity.maxPaymentsPerHour} payments per hour`
                : null,
              s.velocity?.maxAmountPerMerchantPerDay !== undefined
                ? `${money(s.velocity.maxAmountPerMerchantPerDay)} per merchant per day`
                : null,
            ]
              .filter(Boolean)
              .join('; ') || 'no limit',
          ),
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
      ),
      h(
        'section',
        { class: 'card', 'aria-labelledby': 'chart-h' },
        h('h2', { id: 'chart-h' }, 'Spend over time'),
        spendChart(receipts, s.budget.amount, cur, s.createdAt),
        below
          ? h('p', { class: 'muted' }, 'With the payments of the sessions below it, which its spend counts.')
          : null,
      ),
      h(
        'section',
        { class: 'card', 'aria-labelledby': 'rcpt-h' },
        h(
          'div',
          { class: 'section-head' },
          h('h2', { id: 'rcpt-h' }, `Receipts (${receipts.length})`),
          receipts.length ? csvButton(s, receipts) : null,
        ),
        receipts.length === 0
          ? h('p', { class: 'empty' }, 'No payments yet.')
          : h(
              'div',
              { class: 'table-wrap' },
              h(
                'table',
                { class: 'grid' },
                h(
                  'thead',
                  null,
                  h(
                    'tr',
                    null,
                    ...['Paid at', 'Amount', 'Merchant', 'Purpose', below ? 'Paid by' : null, 'Tx ref', 'Signature', '']
                      .filter((c) => c !== null)
                      .map((c) => h('th', { scope: 'col' }, c)),
                  ),
                ),
                h(
                  'tbody',
                  null,
                  ...[...receipts]
                    .sort((a, b) => b.paidAt.localeCompare(a.paidAt))
                    .map((r) =>
                      h(
                        'tr',
                        { 'data-receipt': r.receiptId },
                        h('td', null, formatTime(r.paidAt)),
                        h('td', { class: 'num' }, formatMoney(r.amount.amountMinor, r.amount.currency)),
                        h('td', null, r.merchant),
                        h('td', { class: 'mono' }, r.purpose),
                        below
                          ? h(
                              'td',
                              { 'data-paid-by': r.sessionId },
                              r.sessionId === s.sessionId
                                ? 'this session'
                                : h('a', { href: `#/sessions/${r.sessionId}` }, label(r.sessionId)),
                            )
                          : null,
                        h('td', { class: 'mono ellipsis', title: r.txRef }, r.txRef),
                        h('td', null, checkMark(r)),
                        h(
                          'td',
                          null,
                          h(
                            'a',
                            {
                              href: `#/sessions/${r.sessionId}/receipts/${r.receiptId}`,
                              'aria-label': `Open receipt ${r.receiptId}`,
                            },
                            'Open',
                          ),
                        ),
                      ),
                    ),
                ),
              ),
            ),
      ),
      h(
        'section',
        { class: 'card', 'aria-labelledby': 'hooks-h' },
        h('h2', { id: 'hooks-h' }, 'Webhook deliveries'),
        !s.webhookUrl
          ? h('p', { class: 'empty' }, 'No webhook URL for this session.')
          : dispatches.length === 0
            ? h('p', { class: 'empty' }, 'No deliveries yet.')
            : h(
                'div',
                { class: 'table-wrap' },
                h(
                  'table',
                  { class: 'grid' },
                  h(
                    'thead',
                    null,
                    h(
                      'tr',
                      null,
                      ...['Time', 'Event', 'Status', 'Attempts', 'Last response'].map((c) =>
                        h('th', { scope: 'col' }, c),
                      ),
                    ),
                  ),
                  h(
                    'tbody',
                    null,
                    ...dispatches.map((d) =>
                      h(
                        'tr',
                        null,
                        h('td', null, formatTime(d.createdAt)),
                        h('td', { class: 'mono' }, d.eventType),
                        h('td', null, h('span', { class: `badge dispatch-${d.status}` }, d.status)),
                        h('td', { class: 'num' }, String(d.attempts)),
                        h('td', { class: 'muted' }, d.lastStatus ? `HTTP ${d.lastStatus}` : (d.lastError ?? '—')),
                      ),
                    ),
                  ),
                ),
              ),
      ),
    );
  }

  function actions(s: SessionView): HTMLElement[] {
    const out: HTMLElement[] = [];
    if (s.state === 'paused' && s.continuationToken) {
      const b = h(
        'button',
        { type: 'button', class: 'btn primary', 'data-action': 'continue' },
        'Approve continuation…',
      );
      b.addEventListener('click', () => approve(s));
      out.push(b);
    }
    if (s.state === 'active' || s.state === 'paused') {
      const b = h('button', { type: 'button', class: 'btn danger', 'data-action': 'revoke' }, 'Revoke session…');
      b.addEventListener('click', () => revoke(s));
      out.push(b);
    }
    return out;
  }

  function approve(s: SessionView) {
    const digits = currencyDigits(s.budget.currency);
    const max = s.softLimit?.amount ?? '0';
    const input = h('input', {
      id: 'raise',
      name: 'raise',
      inputmode: 'decimal',
      autocomplete: 'off',
      'aria-describedby': 'raise-help',
    });
    confirmDialog({
      title: 'Approve continuation',
      body: [
        `“${s.label}” paused at ${formatMoney(s.budget.amount, s.budget.currency)}. Approving ` +
          'lets it spend again, up to a new ceiling. The approval can be used once.',
      ],
      fields: [
        h(
          'div',
          { class: 'field' },
          h('label', { for: 'raise' }, `Raise the ceiling by (${s.budget.currency}, optional)`),
          input,
          h(
            'p',
            { id: 'raise-help', class: 'help' },
            `At most ${formatMoney(max, s.budget.currency)}; empty raises by exactly that.`,
          ),
        ),
      ],
      confirm: 'Approve',
      async onConfirm() {
        let amount: string | undefined;
        if (input.value.trim()) {
          const m = toMinor(input.value, digits);
          if ('error' in m) return `Raise: ${m.error}.`;
          if (BigInt(m.minor) === 0n || BigInt(m.minor) > BigInt(max))
            return `Raise: between ${formatMoney('1', s.budget.currency)} and ${formatMoney(max, s.budget.currency)}.`;
          amount = m.minor;
        }
        try {
          await continueSession(s.sessionId, s.continuationToken!, amount);
        } catch (e) {
          if (e instanceof ApiError && e.code === 'continuation_invalid')
            return 'This approval was already used, or the session is no longer paused. The page has been refreshed.';
          throw e;
        } finally {
          await load();
        }
      },
    });
  }

  function revoke(s: SessionView) {
    confirmDialog({
      title: 'Revoke this session?',
      body: [
        h(
          'p',
          null,
          h('strong', null, s.label || s.sessionId),
          ` has spent ${formatMoney(s.spentMinor, s.budget.currency)} ` +
            `of ${formatMoney(s.budget.amount, s.budget.currency)}.`,
        ),
        'Revoking stops it now, on every gateway instance: the agent’s next payment is refused, ' +
          'and verifiers see the grant revoked. This cannot be undone.',
      ],
      confirm: 'Revoke session',
      danger: true,
      async onConfirm() {
        await revokeSession(s.sessionId);
        await load();
      },
    });
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

/** The receipts as CSV for a spreadsheet: amounts in minor units and in the currency's units, exactly. */
function csvButton(s: SessionView, receipts: Receipt[]) {
  const b = h('button', { type: 'button', class: 'btn', 'data-action': 'csv' }, 'Download CSV');
  b.addEventListener('click', () => {
    // A leading =, +, - or @ would be a formula in a spreadsheet (CSV injection): quoted and prefixed.
    const cell = (v: string) => `"${(/^[=+\-@]/.test(v) ? `'${v}` : v).replace(/"/g, '""')}"`;
    const rows = [
      [
        'paidAt',
        'receiptId',
        'amountMinor',
        'amount',
        'currency',
        'merchant',
        'purpose',
        'txRef',
        'rail',
        'keyId',
        'sessionId',
      ],
    ];
    for (const r of [...receipts].sort((a, b) => a.paidAt.localeCompare(b.paidAt))) {
      rows.push([
        r.paidAt,
        r.receiptId,
        r.amount.amountMinor,
        formatMoney(r.amount.amountMinor, r.amount.currency).replace(/ .*$/, '').replace(/,/g, ''),
        r.amount.currency,
        r.merchant,
        r.purpose,
        r.txRef,
        r.rail,
        r.keyId,
        r.sessionId,
      ]);
    }
    const url = URL.createObjectURL(
      new Blob([rows.map((r) => r.map(cell).join(',')).join('\r\n') + '\r\n'], { type: 'text/csv' }),
    );
    const a = h('a', { href: url, download: `${s.sessionId}-receipts.csv` });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  });
  return b;
}

// Every period named: a new one fails the typecheck until it has a name here.
const PERIOD_NAMES: Record<WindowPeriod, string> = {
  PT1H: 'hourly',
  P1D: 'daily',
  P7D: 'weekly',
  P1M: 'monthly',
  P1Y: 'yearly',
};
const periodName = (every: string) => PERIOD_NAMES[every as WindowPeriod] ?? every;
const capitalised = (t: string) => t.charAt(0).toUpperCase() + t.slice(1);

/** Each budget window as a bar of its own, with when it resets (PROTOCOL.md §13). */
function windowsCard(windows: NonNullable<SessionDetail['windows']>, cur: string, state: string) {
  return h(
    'section',
    { class: 'card', 'aria-labelledby': 'windows-h' },
    h('h2', { id: 'windows-h' }, 'Windows'),
    ...windows.map((w) =>
      h(
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
      ),
    ),
  );
}

/** The session's place in its tree of child sessions (PROTOCOL.md §14), each node with its spend. */
function treeCard(tree: SessionTree, s: SessionDetail, label: (id: string) => string) {
  const node = (n: SessionTree): HTMLElement =>
    h(
      'li',
      { 'data-tree-session': n.session.sessionId },
      h(
        'div',
        { class: 'tree-node' },
        n.session.sessionId === s.sessionId
          ? h('strong', null, n.session.label || n.session.sessionId)
          : h('a', { href: `#/sessions/${n.session.sessionId}` }, n.session.label || n.session.sessionId),
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
      n.children.length ? h('ul', { class: 'tree' }, ...n.children.map(node)) : null,
    );
  return h(
    'section',
    { class: 'card', 'aria-labelledby': 'tree-h' },
    h('h2', { id: 'tree-h' }, 'Child sessions'),
    s.parentId
      ? h('p', null, 'A child of ', h('a', { href: `#/sessions/${s.parentId}` }, label(s.parentId)), '.')
      : null,
    h('ul', { class: 'tree' }, node(tree)),
  );
}

/** Every session id of a tree. */
function treeIds(n: SessionTree): string[] {
  return [n.session.sessionId, ...n.children.flatMap(treeIds)];
}

function dt(term: string, value: Node | string) {
  return h('div', null, h('dt', null, term), h('dd', null, value));
}
function list(items: string[]) {
  return h('ul', { class: 'inline-list' }, ...items.map((i) => h('li', { class: 'mono' }, i)));
}
