/**
 * A deterministic model of a root budget spent in three regions (docs/scaling.md "Budgets across
 * regions"). The home region holds the budget's one authoritative ledger; another region spends
 * either through the home (while its link is up) or from an escrowed share the home has moved to
 * it beforehand. Links carry messages in order and hold them while a partition lasts.
 *
 * `escrow` is the design; `cachedView` is the tempting wrong one (a cut-off region keeps
 * spending against its last view of the budget) and exists so the test shows its property fails.
 */

export type Policy = 'escrow' | 'cachedView';

export type Step =
  | { kind: 'spend'; region: number; amount: number }
  | { kind: 'grant'; region: number; amount: number }
  | { kind: 'release'; region: number }
  | { kind: 'cut'; region: number }
  | { kind: 'heal'; region: number }
  | { kind: 'deliver'; region: number };

/** A message on the link between the home and a region (in either direction). */
type Message =
  { kind: 'share'; amount: number } | { kind: 'returned'; amount: number } | { kind: 'view'; left: number };

interface Region {
  /** Escrow received so far (what the region may spend on its own), and spent from it. */
  share: number;
  spentLocal: number;
  /** The budget left as this region last heard it (cachedView only). */
  view: number;
  up: boolean;
  toRegion: Message[];
  toHome: Message[];
  /** While cut off: what it spent since the cut, and what its share allowed at the cut. */
  cutSpent: number;
  cutAllowance: number;
}

export interface Figures {
  budget: number;
  /** Spent in all regions together, counted where the money moved. */
  spent: number;
  overspend: number;
  accepted: number;
  refused: number;
  /** Spends attempted by cut-off regions, and those refused (their share ran out). */
  cutOffAttempts: number;
  cutOffRefused: number;
  /** Largest spend of a cut-off region beyond what its share allowed at the cut (0 when it holds). */
  worstCutExcess: number;
}

export const HOME = 0;
export const REGIONS = 3;

/** Runs `steps` on a budget of `budget` minor units; checks nothing, returns what happened. */
export function simulate(budget: number, steps: Step[], policy: Policy = 'escrow'): Figures {
  // The home's ledger: what it may still hand out or spend itself, and escrow per region.
  let available = budget;
  let spentHome = 0;
  const regions: Region[] = Array.from({ length: REGIONS }, () => ({
    share: 0,
    spentLocal: 0,
    view: budget,
    up: true,
    toRegion: [],
    toHome: [],
    cutSpent: 0,
    cutAllowance: 0,
  }));
  const f: Figures = {
    budget,
    spent: 0,
    overspend: 0,
    accepted: 0,
    refused: 0,
    cutOffAttempts: 0,
    cutOffRefused: 0,
    worstCutExcess: 0,
  };
  const broadcastView = () => {
    for (let i = 1; i < REGIONS; i++) regions[i]!.toRegion.push({ kind: 'view', left: available });
  };
  const deliver = (i: number) => {
    const r = regions[i]!;
    if (!r.up) return;
    for (const m of r.toRegion.splice(0)) {
      if (m.kind === 'share') r.share += m.amount;
      if (m.kind === 'view') r.view = m.left;
    }
    for (const m of r.toHome.splice(0)) if (m.kind === 'returned') available += m.amount;
  };
  const spendAtHome = (amount: number) => {
    if (available < amount) return false;
    available -= amount;
    spentHome += amount;
    broadcastView();
    return true;
  };
  for (const s of steps) {
    const r = regions[s.region]!;
    switch (s.kind) {
      case 'cut':
        if (s.region === HOME || !r.up) break;
        r.up = false;
        r.cutSpent = 0;
        r.cutAllowance = r.share - r.spentLocal;
        break;
      case 'heal':
        r.up = true;
        deliver(s.region);
        break;
      case 'deliver':
        deliver(s.region);
        break;
      case 'grant':
        // The home debits its ledger before the share leaves: in flight, it is nobody's to spend twice.
        if (s.region === HOME || available < s.amount) break;
        available -= s.amount;
        r.toRegion.push({ kind: 'share', amount: s.amount });
        deliver(s.region);
        break;
      case 'release': {
        // The region gives back what it has not spent: it stops spending it before it is sent.
        if (s.region === HOME) break;
        const unspent = r.share - r.spentLocal;
        r.share -= unspent;
        if (unspent > 0) r.toHome.push({ kind: 'returned', amount: unspent });
        deliver(s.region);
        break;
      }
      case 'spend': {
        let ok: boolean;
        if (s.region === HOME || r.up) {
          // Through the home's ledger (a region with its link up forwards); then from the share.
          ok = spendAtHome(s.amount);
          if (!ok && s.region !== HOME && r.share - r.spentLocal >= s.amount) {
            r.spentLocal += s.amount;
            ok = true;
          }
        } else {
          f.cutOffAttempts++;
          if (policy === 'escrow') ok = r.share - r.spentLocal >= s.amount;
          else ok = r.view + r.share - r.spentLocal >= s.amount;
          if (ok) {
            // cachedView spends its stale view first, as if the budget were still there.
            const fromView = policy === 'cachedView' ? Math.min(r.view, s.amount) : 0;
            r.view -= fromView;
            r.spentLocal += s.amount - fromView;
            spentHome += fromView; // the money moved; the home learns of it only later
            r.cutSpent += s.amount;
            f.worstCutExcess = Math.max(f.worstCutExcess, r.cutSpent - r.cutAllowance);
          } else f.cutOffRefused++;
        }
        if (ok) f.accepted++;
        else f.refused++;
        break;
      }
    }
  }
  f.spent = spentHome + regions.reduce((a, r) => a + r.spentLocal, 0);
  f.overspend = Math.max(0, f.spent - budget);
  return f;
}
