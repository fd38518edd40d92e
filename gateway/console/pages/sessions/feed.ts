/** The live activity under the sessions list: this tab's last live events, newest first. */
import { h, formatMoney, formatTime } from '../../dom.js';
import type { LiveEvent } from '../../live.js';

/** The last live events of this tab, newest first (kept across page changes). */
export const activity: LiveEvent[] = [];

/** The feed's items: the twelve newest events, or a line saying what will appear. */
export function feedItems(labels: Map<string, string>) {
  return activity.length === 0
    ? h('li', { class: 'muted' }, 'Nothing yet: payments, refusals and state changes appear here as they happen.')
    : activity
        .slice(0, 12)
        .map((e) =>
          h(
            'li',
            { class: `ev ev-${e.type.replace(/\W/g, '-')}` },
            h('time', { datetime: e.at }, formatTime(e.at).slice(11)),
            h('span', { class: 'ev-type' }, e.type),
            h('a', { href: `#/sessions/${e.sessionId}` }, labels.get(e.sessionId) ?? e.sessionId),
            e.amountMinor && e.currency
              ? h('span', { class: 'num' }, formatMoney(String(e.amountMinor), String(e.currency)))
              : null,
            e.merchant ? h('span', { class: 'muted' }, String(e.merchant)) : null,
            e.code ? h('span', { class: 'code' }, String(e.code)) : null,
          ),
        );
}
