/** What every page gives the shell (main.ts). */
import type { LiveEvent } from './live.js';
import { h } from './dom.js';
import { ApiError } from './api.js';

export interface Page {
  title: string;
  el: HTMLElement;
  /** Reload what the page shows (after a reconnection or a resync). */
  refresh?(): Promise<void>;
  /** A live event of this owner. */
  onLive?(e: LiveEvent): void;
  dispose?(): void;
}

/** The page heading: focused on navigation, so keyboard and screen-reader users start there. */
export const heading = (text: string, ...extra: (Node | string)[]) => h('h1', { tabindex: '-1' }, text, ...extra);

/**
 * A data table: one heading per column (`scope="col"` for screen readers), then the rows;
 * `caption` names it for screen readers only.
 * @example gridTable(['Time', 'Event'], rows.map(row))
 */
export function gridTable(
  columns: string[],
  rows: Node[],
  o: { class?: string; caption?: string } = {},
): HTMLTableElement {
  return h(
    'table',
    { class: o.class ?? 'grid' },
    o.caption ? h('caption', { class: 'visually-hidden' }, o.caption) : null,
    h('thead', null, h('tr', null, ...columns.map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', null, ...rows),
  );
}

/** An error box for a failed load. */
export function errorBox(e: unknown): HTMLElement {
  const msg =
    e instanceof ApiError
      ? e.status === 404
        ? 'No such session for this owner.'
        : `${e.message} (${e.code})`
      : (e as Error).message;
  return h('div', { class: 'callout error', role: 'alert' }, msg);
}

/** Coalesces bursts of live events into one refresh. */
export function debounce(f: () => void, ms = 150): () => void {
  let t: ReturnType<typeof setTimeout> | undefined;
  return () => {
    if (t) clearTimeout(t);
    t = setTimeout(f, ms);
  };
}

/**
 * Re-renders inside `container` without losing the keyboard focus: a live update must not throw a
 * keyboard user back to the top of the page. The focused element is found again by what it is
 * (its data-action, id or link target).
 */
export function keepFocus(container: HTMLElement, render: () => void) {
  const a = document.activeElement as HTMLElement | null;
  const inside = a && container.contains(a) && a !== container;
  const selector = !inside
    ? undefined
    : a.dataset.action
      ? `[data-action="${CSS.escape(a.dataset.action)}"]`
      : a.id
        ? `#${CSS.escape(a.id)}`
        : a.getAttribute('href')
          ? `[href="${CSS.escape(a.getAttribute('href')!)}"]`
          : undefined;
  render();
  if (selector && !container.contains(document.activeElement))
    (container.querySelector(selector) as HTMLElement | null)?.focus();
}
