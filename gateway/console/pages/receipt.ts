/** One signed receipt: its fields, its check mark with how it was verified, and the exact signed JSON. */
import { h, clear, formatMoney, formatTime } from '../dom.js';
import { receiptsOf, type Receipt } from '../api.js';
import { heading, errorBox, type Page } from '../page.js';
import { checkOf, checkMark } from './session/check.js';

export function receiptPage(sessionId: string, receiptId: string, o: { labels: Map<string, string> }): Page {
  const el = h('div', { class: 'page' }, h('p', { class: 'muted' }, 'Loading…'));
  async function load() {
    let r: Receipt | undefined;
    try {
      r = (await receiptsOf(sessionId)).receipts.find((x) => x.receiptId === receiptId);
    } catch (e) {
      return clear(el, heading('Receipt'), errorBox(e));
    }
    if (!r)
      return clear(
        el,
        heading('Receipt'),
        h('div', { class: 'callout error', role: 'alert' }, 'No such receipt in this session.'),
      );
    const verdict = h('p', { class: 'muted' });
    void checkOf(r).then((c) => (verdict.textContent = c.message));
    const { sba, ...shown } = r;
    clear(
      el,
      h(
        'div',
        null,
        h(
          'nav',
          { 'aria-label': 'Breadcrumb', class: 'crumbs' },
          h('a', { href: '#/sessions' }, 'Sessions'),
          ' › ',
          h('a', { href: `#/sessions/${sessionId}` }, o.labels.get(sessionId) ?? sessionId),
          ' › receipt',
        ),
        h(
          'div',
          { class: 'title-row' },
          heading(`Receipt ${formatMoney(r.amount.amountMinor, r.amount.currency)}`),
          checkMark(r),
        ),
      ),
      h(
        'section',
        { class: 'card', 'aria-labelledby': 'sig-h' },
        h('h2', { id: 'sig-h' }, 'Signature'),
        verdict,
        h(
          'p',
          { class: 'help' },
          'Checked in this browser against the gateway’s published keys (/.well-known/ctl-keys.json), ' +
            'over the exact bytes below: the receipt’s canonical JSON (RFC 8785) with the “ctl-receipt/1” prefix.',
        ),
      ),
      h(
        'section',
        { class: 'card', 'aria-labelledby': 'fields-h' },
        h('h2', { id: 'fields-h' }, 'Payment'),
        h(
          'dl',
          { class: 'bounds' },
          ...(
            [
              ['Amount', formatMoney(r.amount.amountMinor, r.amount.currency)],
              ['Merchant', r.merchant],
              ['Purpose', r.purpose],
              ['Paid at', formatTime(r.paidAt)],
              ['Transaction', r.txRef],
              ['Rail', r.rail],
              ['Receipt id', r.receiptId],
              ['Signing key', r.keyId],
              ['Under an SBA', sba ? 'yes: the signed budget authorization is embedded' : 'no'],
            ] as const
          ).map(([t, v]) =>
            h(
              'div',
              null,
              h('dt', null, t),
              h(
                'dd',
                { class: t === 'Amount' || t === 'Merchant' || t === 'Purpose' || t === 'Paid at' ? '' : 'mono wrap' },
                v,
              ),
            ),
          ),
        ),
      ),
      h(
        'section',
        { class: 'card', 'aria-labelledby': 'raw-h' },
        h('h2', { id: 'raw-h' }, 'Signed receipt (without the embedded SBA)'),
        h('pre', { class: 'raw', tabindex: '0', 'aria-label': 'Receipt JSON' }, JSON.stringify(shown, null, 2)),
      ),
    );
  }
  void load();
  return { title: 'Receipt', el, refresh: load };
}
