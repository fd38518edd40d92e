/** A session's webhook deliveries: each signed event sent to its webhook URL, with how it went. */
import { h, formatTime } from '../../dom.js';
import type { Dispatch, SessionDetail } from '../../api.js';
import { gridTable } from '../../page.js';

export function webhooksCard(s: SessionDetail, dispatches: Dispatch[]) {
  return h(
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
            gridTable(['Time', 'Event', 'Status', 'Attempts', 'Last response'], dispatches.map(dispatchRow)),
          ),
  );
}

function dispatchRow(d: Dispatch) {
  return h(
    'tr',
    null,
    h('td', null, formatTime(d.createdAt)),
    h('td', { class: 'mono' }, d.eventType),
    h('td', null, h('span', { class: `badge dispatch-${d.status}` }, d.status)),
    h('td', { class: 'num' }, String(d.attempts)),
    h('td', { class: 'muted' }, d.lastStatus ? `HTTP ${d.lastStatus}` : (d.lastError ?? '—')),
  );
}
