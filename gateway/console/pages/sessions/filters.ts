/** The state filter of the sessions list: one pressed chip per state, each with its count. */
import { h } from '../../dom.js';

export const STATES = ['all', 'active', 'paused', 'revoked', 'expired'] as const;
export type Filter = (typeof STATES)[number];

/** The filter a route names (`#/sessions?state=`), or all. */
export const filterOf = (name: string | undefined): Filter =>
  (STATES as readonly string[]).includes(name ?? '') ? (name as Filter) : 'all';

/**
 * The chips for `container`. A click keeps the choice in the address (replaced, not pushed: the
 * Back button leaves the list), re-renders, says how many are shown and puts the focus back on the
 * pressed chip, which the re-render replaced.
 */
export function filterChips(o: {
  container: HTMLElement;
  status: HTMLElement;
  current: Filter;
  count: (st: Filter) => number;
  choose: (st: Filter) => void;
  render: () => void;
}) {
  return STATES.map((st) => {
    const b = h(
      'button',
      { type: 'button', class: 'chip', 'aria-pressed': String(o.current === st), 'data-action': `filter-${st}` },
      `${st[0]!.toUpperCase()}${st.slice(1)} `,
      h('span', { class: 'count' }, String(o.count(st))),
    );
    b.addEventListener('click', () => {
      o.choose(st);
      history.replaceState(null, '', st === 'all' ? '#/sessions' : `#/sessions?state=${st}`);
      o.render();
      const n = o.count(st);
      o.status.textContent = `${n} ${st === 'all' ? '' : `${st} `}session${n === 1 ? '' : 's'} shown`;
      (o.container.querySelector(`[aria-pressed="true"]`) as HTMLElement | null)?.focus();
    });
    return b;
  });
}
