/**
 * Spend over time: cumulative spend (a step line from the receipts) against the ceiling, as
 * inline SVG (no library, nothing external). The receipts table below it is the same data as
 * text, so the picture carries a one-sentence summary for screen readers.
 */
import { s, formatMoney, formatTime } from './dom.js';
import type { Receipt } from './api.js';

export function spendChart(receipts: Receipt[], ceilingMinor: string, currency: string, startIso: string): SVGElement {
  const W = 1120,
    H = 200,
    L = 8,
    R = 8,
    T = 14,
    B = 22;
  const pts = [...receipts].sort((a, b) => a.paidAt.localeCompare(b.paidAt));
  const start = Date.parse(startIso);
  const end = Math.max(Date.now(), ...pts.map((r) => Date.parse(r.paidAt)), start + 60_000);
  let total = 0n;
  const steps = pts.map((r) => ({ t: Date.parse(r.paidAt), v: (total += BigInt(r.amount.amountMinor)) }));
  const ceiling = BigInt(ceilingMinor);
  const top = ceiling > total ? ceiling : total;
  const x = (t: number) => L + ((t - start) / (end - start)) * (W - L - R);
  const y = (v: bigint) => T + (1 - (top > 0n ? Number((v * 10_000n) / top) / 10_000 : 0)) * (H - T - B);
  let d = `M${x(start).toFixed(1)},${y(0n).toFixed(1)}`;
  let last = 0n;
  for (const p of steps) {
    d += ` H${x(p.t).toFixed(1)} V${y(p.v).toFixed(1)}`;
    last = p.v;
  }
  d += ` H${x(end).toFixed(1)}`;
  const payments = `${steps.length} payment${steps.length === 1 ? '' : 's'}`;
  const spent = formatMoney(last.toString(), currency);
  const summary =
    `Spend over time: ${payments}, ${spent} of a ${formatMoney(ceilingMinor, currency)} ceiling, ` +
    `from ${formatTime(startIso)} to now.`;
  return s(
    'svg',
    { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', 'aria-label': summary },
    s('title', null, summary),
    s('line', { x1: L, x2: W - R, y1: y(ceiling), y2: y(ceiling), class: 'ceiling' }),
    s(
      'text',
      { x: W - R, y: y(ceiling) - 4, 'text-anchor': 'end', class: 'axis' },
      `ceiling ${formatMoney(ceilingMinor, currency)}`,
    ),
    s('line', { x1: L, x2: W - R, y1: y(0n), y2: y(0n), class: 'base' }),
    s('path', { d, class: 'spend' }),
    ...steps.map((p) => s('circle', { cx: x(p.t), cy: y(p.v), r: 3, class: 'dot' })),
    s('text', { x: L, y: H - 6, class: 'axis' }, formatTime(startIso)),
    s('text', { x: W - R, y: H - 6, 'text-anchor': 'end', class: 'axis' }, 'now'),
  );
}
