/**
 * Two small custom elements the pages reuse: a spend bar (spent / reserved / remaining of the
 * ceiling) and an expiry countdown that ticks without re-rendering the page.
 */
import { formatMoney, formatRemaining, formatTime, h } from './dom.js';

/** `<ctl-spend-bar spent reserved ceiling currency>`: three segments, one accessible sentence. */
export class SpendBar extends HTMLElement {
  static observedAttributes = ['spent', 'reserved', 'ceiling', 'currency', 'compact', 'state'];
  attributeChangedCallback() {
    this.render();
  }
  connectedCallback() {
    this.render();
  }
  private render() {
    const spent = BigInt(this.getAttribute('spent') || '0');
    const reserved = BigInt(this.getAttribute('reserved') || '0');
    const ceiling = BigInt(this.getAttribute('ceiling') || '0');
    const cur = this.getAttribute('currency') || '';
    const ended = this.getAttribute('state') === 'revoked' || this.getAttribute('state') === 'expired';
    // A revoked or expired session can spend nothing more, whatever is left under its ceiling.
    const remaining = !ended && ceiling > spent + reserved ? ceiling - spent - reserved : 0n;
    // Percent with one decimal, from BigInt: never a float over money.
    const pct = (v: bigint) => (ceiling > 0n ? Number((v * 1000n) / ceiling) / 10 : 0);
    const left = ended
      ? `nothing remaining (${this.getAttribute('state')})`
      : `${formatMoney(remaining.toString(), cur)} remaining`;
    const label =
      `Spent ${formatMoney(spent.toString(), cur)} of ${formatMoney(ceiling.toString(), cur)}; ` +
      `${formatMoney(reserved.toString(), cur)} reserved; ${left}`;
    const bar = h('div', { class: 'bar', role: 'img', 'aria-label': label, title: label });
    const seg = (cls: string, p: number) => {
      const el = h('span', { class: `seg ${cls}` });
      el.style.width = `${Math.min(100, p)}%`;
      return el;
    };
    bar.append(seg('spent', pct(spent)), seg('reserved', pct(reserved)));
    const used = pct(spent + reserved);
    this.replaceChildren(
      bar,
      h(
        'span',
        { class: 'bar-figures', 'aria-hidden': 'true' },
        h('strong', null, formatMoney(spent.toString(), cur)),
        ` of ${formatMoney(ceiling.toString(), cur)} · ${used}%`,
      ),
    );
    this.classList.toggle('high', used >= 80);
  }
}

const ticking = new Set<Countdown>();
let timer: ReturnType<typeof setInterval> | undefined;

/** `<ctl-countdown at="2026-…Z" state="active">`: "in 1h 05m", or the end state. */
export class Countdown extends HTMLElement {
  static observedAttributes = ['at', 'state'];
  connectedCallback() {
    ticking.add(this);
    if (!timer) timer = setInterval(() => ticking.forEach((c) => c.render()), 1000);
    this.render();
  }
  disconnectedCallback() {
    ticking.delete(this);
    if (ticking.size === 0 && timer) {
      clearInterval(timer);
      timer = undefined;
    }
  }
  attributeChangedCallback() {
    this.render();
  }
  render() {
    const at = this.getAttribute('at') || '';
    const state = this.getAttribute('state');
    const left = Date.parse(at) - Date.now();
    this.title = `Expires ${formatTime(at)}`;
    if (state === 'revoked') this.textContent = 'stopped';
    else if (left <= 0 || state === 'expired') this.textContent = 'expired';
    else this.textContent = `in ${formatRemaining(left)}`;
    this.classList.toggle('soon', left > 0 && left < 15 * 60_000 && state !== 'revoked');
  }
}

export function defineComponents() {
  if (!customElements.get('ctl-spend-bar')) customElements.define('ctl-spend-bar', SpendBar);
  if (!customElements.get('ctl-countdown')) customElements.define('ctl-countdown', Countdown);
}

/**
 * A state badge: text and shape, not colour alone. `from`: the ancestor session whose state it is
 * (a child of a paused parent is paused with it), named beside the state.
 */
export function stateBadge(state: string, from?: string) {
  const icon: Record<string, string> = { active: '●', paused: '❚❚', revoked: '■', expired: '○' };
  return h(
    'span',
    { class: `badge state-${state}`, 'data-state-from': from, title: from ? `${state} with ${from}` : undefined },
    h('span', { 'aria-hidden': 'true' }, icon[state] ?? '•'),
    ` ${state}`,
    from ? h('span', { class: 'badge-from' }, ' (inherited)') : null,
    from ? h('span', { class: 'visually-hidden' }, `: the state of ${from}`) : null,
  );
}
