/**
 * A session's signed receipts, newest first, each with its signature checked in the browser; with
 * a "Paid by" column when the receipts of the sessions below it are among them (PROTOCOL.md §14).
 */
import { h, formatMoney, formatTime } from '../../dom.js';
import type { Receipt, SessionDetail } from '../../api.js';
import { gridTable } from '../../page.js';
import { checkMark } from './check.js';
import { csvButton } from './csv.js';

export function receiptsCard(s: SessionDetail, receipts: Receipt[], below: boolean, label: (id: string) => string) {
  return h(
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
          gridTable(
            ['Paid at', 'Amount', 'Merchant', 'Purpose', ...(below ? ['Paid by'] : []), 'Tx ref', 'Signature', ''],
            [...receipts].sort((a, b) => b.paidAt.localeCompare(a.paidAt)).map((r) => receiptRow(r, s, below, label)),
          ),
        ),
  );
}

function receiptRow(r: Receipt, s: SessionDetail, below: boolean, label: (id: string) => string) {
  return h(
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
        { href: `#/sessions/${r.sessionId}/receipts/${r.receiptId}`, 'aria-label': `Open receipt ${r.receiptId}` },
        'Open',
      ),
    ),
  );
}
