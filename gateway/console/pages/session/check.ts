/**
 * A receipt's signature checked in the browser, and the check mark that shows the answer: shared
 * by the session's receipts table and the receipt page.
 */
import { h, clear } from '../../dom.js';
import type { Receipt } from '../../api.js';
import { checkReceipt, type ReceiptCheck } from '../../receipt-check.js';
import { canonicalize } from '../../../../src/index.js';

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
