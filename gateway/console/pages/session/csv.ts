/** The receipts as CSV for a spreadsheet: amounts in minor units and in the currency's units, exactly. */
import { h, formatMoney } from '../../dom.js';
import type { Receipt, SessionView } from '../../api.js';

const COLUMNS = [
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
];

export function csvButton(s: SessionView, receipts: Receipt[]) {
  const b = h('button', { type: 'button', class: 'btn', 'data-action': 'csv' }, 'Download CSV');
  b.addEventListener('click', () => download(`${s.sessionId}-receipts.csv`, receiptsCsv(receipts)));
  return b;
}

/** Oldest first, one line per receipt, CRLF line ends. */
function receiptsCsv(receipts: Receipt[]) {
  // A leading =, +, - or @ would be a formula in a spreadsheet (CSV injection): quoted and prefixed.
  const cell = (v: string) => `"${(/^[=+\-@]/.test(v) ? `'${v}` : v).replace(/"/g, '""')}"`;
  const rows = [COLUMNS];
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
  return rows.map((r) => r.map(cell).join(',')).join('\r\n') + '\r\n';
}

/** Saves text as a file through a temporary link: nothing leaves the browser. */
function download(name: string, text: string) {
  const url = URL.createObjectURL(new Blob([text], { type: 'text/csv' }));
  const a = h('a', { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
