/**
 * What the create page becomes once the session exists: its budget in a sentence, and the session
 * token (and webhook secret) shown once with a copy button: the gateway keeps only a hash.
 */
import { h, formatMoney, formatTime } from '../../dom.js';
import { heading } from '../../page.js';

export interface Created {
  sessionToken: string;
  sessionId: string;
  expiresAt: string;
  webhookSecret?: string;
}

export function createdView(res: Created, config: Record<string, unknown>) {
  const b = config.budget as { amount: string; currency: string };
  const label = String(config.label ?? '');
  return [
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
      secretField('Session token', res.sessionToken, 'token'),
      res.webhookSecret ? secretField('Webhook secret', res.webhookSecret, 'whsec') : null,
      h(
        'div',
        { class: 'actions' },
        h('a', { class: 'btn primary', href: `#/sessions/${res.sessionId}` }, 'Open the session'),
        h('a', { class: 'btn', href: '#/sessions' }, 'Back to sessions'),
      ),
    ),
  ];
}

/** A read-only secret with a copy button; where the clipboard is refused, it is selected for the person to copy. */
function secretField(label: string, value: string, id: string) {
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
  return h('div', { class: 'field' }, h('label', { for: id }, label), h('div', { class: 'copy-row' }, out, copy), done);
}
