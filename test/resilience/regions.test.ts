/**
 * Budgets across regions (docs/scaling.md): three regions, the home region writes the root
 * budget, partitions injected by fast-check's schedules (fixed seed: the same schedules every
 * run). With escrow nothing is overspent and a cut-off region spends at most the share it held
 * when cut; the tempting design (a cut-off region spends against its last view of the budget)
 * is shown to overspend, so the property is one that can fail.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import fc from 'fast-check';
import { REGIONS, simulate, type Figures, type Step } from './regions-model.js';

const BUDGET = 1000;
const SEED = 20261129;
const RUNS = 2000;

const region = fc.integer({ min: 0, max: REGIONS - 1 });
const amount = fc.integer({ min: 1, max: 300 });
const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('spend' as const), region, amount }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('grant' as const), region, amount }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('release' as const), region }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('cut' as const), region }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('heal' as const), region }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('deliver' as const), region }) },
);
const schedule = fc.array(step, { minLength: 1, maxLength: 80 });

test('escrow: overspend 0, a cut-off region spends at most its share', () => {
  const total: Omit<Figures, 'budget' | 'worstCutExcess'> & { schedules: number; worstCutExcess: number } = {
    schedules: 0,
    spent: 0,
    overspend: 0,
    accepted: 0,
    refused: 0,
    cutOffAttempts: 0,
    cutOffRefused: 0,
    worstCutExcess: Number.NEGATIVE_INFINITY,
  };
  fc.assert(
    fc.property(schedule, (steps) => {
      const f = simulate(BUDGET, steps, 'escrow');
      total.schedules++;
      total.spent += f.spent;
      total.accepted += f.accepted;
      total.refused += f.refused;
      total.cutOffAttempts += f.cutOffAttempts;
      total.cutOffRefused += f.cutOffRefused;
      total.overspend = Math.max(total.overspend, f.overspend);
      total.worstCutExcess = Math.max(total.worstCutExcess, f.worstCutExcess);
      return f.overspend === 0 && f.spent <= BUDGET && f.worstCutExcess <= 0;
    }),
    { seed: SEED, numRuns: RUNS },
  );
  assert.ok(total.cutOffAttempts > 0, 'the schedules cut regions off and spend there');
  assert.ok(total.cutOffAttempts > total.cutOffRefused, 'cut-off regions did spend from their shares');
  // The figures docs/scaling.md quotes.
  console.log(
    `regions: ${total.schedules} schedules, ${total.accepted} spends accepted, ${total.refused} refused; ` +
      `cut off: ${total.cutOffAttempts} attempted, ${total.cutOffRefused} refused (share exhausted); ` +
      `max overspend ${total.overspend}, max cut-off spend beyond share ${Math.max(0, total.worstCutExcess)}`,
  );
});

test('spending a cached view while cut off overspends (the property can fail)', () => {
  const out = fc.check(
    fc.property(schedule, (steps) => simulate(BUDGET, steps, 'cachedView').overspend === 0),
    { seed: SEED, numRuns: RUNS },
  );
  assert.ok(out.failed, 'a schedule that overspends is found');
  const f = simulate(BUDGET, out.counterexample![0], 'cachedView');
  assert.ok(f.overspend > 0);
  console.log(`regions (cached view): overspend ${f.overspend} in a ${out.counterexample![0].length}-step schedule`);
});

test('a fixed schedule: the home is cut off from a region that holds 300', () => {
  const f = simulate(BUDGET, [
    { kind: 'grant', region: 1, amount: 300 },
    { kind: 'cut', region: 1 },
    { kind: 'spend', region: 1, amount: 200 },
    { kind: 'spend', region: 1, amount: 200 }, // beyond the share: refused
    { kind: 'spend', region: 0, amount: 700 }, // the home spends the rest
    { kind: 'spend', region: 2, amount: 1 }, // nothing left anywhere
    { kind: 'spend', region: 1, amount: 100 },
    { kind: 'heal', region: 1 },
  ]);
  assert.equal(
    { spent: f.spent, accepted: f.accepted, refused: f.refused, overspend: f.overspend },
    { spent: 1000, accepted: 3, refused: 2, overspend: 0 },
  );
});

test.run();
