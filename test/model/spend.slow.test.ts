/**
 * The slow tier of the model-based test (test/model/README.md): batches of longer sequences, on
 * the memory storage and on the device's flash ledger in turn, until at least 100,000 steps have
 * run against the model. Each batch draws its own seed; a failure prints the line that replays it
 * (CTL_MODEL_STORAGE names the batch's storage, CTL_MODEL_SEED runs that one batch).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { formatStats, runModel, type StorageKind } from './spend-harness.js';

const STEPS = 100_000;
const FILE = 'test/model/spend.slow.test.ts';

test(`the SDK answers as the model over at least ${STEPS} steps, memory and flash`, async () => {
  const only = process.env['CTL_MODEL_STORAGE'] as StorageKind | undefined;
  const replaying = process.env['CTL_MODEL_SEED'] !== undefined;
  let steps = 0;
  let sequences = 0;
  for (let batch = 0; steps < STEPS; batch++) {
    const storage = only ?? (batch % 2 === 0 ? 'memory' : 'flash');
    const stats = await runModel({ storage, runs: 500, maxCommands: 60, file: FILE });
    console.log(formatStats(`batch ${batch} (${storage})`, stats));
    steps += stats.steps;
    sequences += stats.sequences;
    if (replaying) return; // one seed: that batch alone
  }
  console.log(`${sequences} sequences, ${steps} steps in all`);
  assert.ok(steps >= STEPS);
});

test.run();
