/** The words and small pieces the session page's cards share: period names, term/value pairs, lists. */
import { h } from '../../dom.js';
import type { WindowPeriod } from '../../../../src/index.js';

// Every period named: a new one fails the typecheck until it has a name here.
const PERIOD_NAMES: Record<WindowPeriod, string> = {
  PT1H: 'hourly',
  P1D: 'daily',
  P7D: 'weekly',
  P1M: 'monthly',
  P1Y: 'yearly',
};
export const periodName = (every: string) => PERIOD_NAMES[every as WindowPeriod] ?? every;
export const capitalised = (t: string) => t.charAt(0).toUpperCase() + t.slice(1);

/** One term and its value in a description list. */
export function dt(term: string, value: Node | string) {
  return h('div', null, h('dt', null, term), h('dd', null, value));
}

/** Identifiers (purposes, merchant globs) in a line, each in monospace. */
export function list(items: string[]) {
  return h('ul', { class: 'inline-list' }, ...items.map((i) => h('li', { class: 'mono' }, i)));
}
