/**
 * The spend state machine against its model (spend-model.ts, from PROTOCOL.md), on the SDK's
 * memory SpendStorage: wallets, three merchant builds on one ledger, holds, captures, voids,
 * revocations, delegations, restarts and clock moves (test/model/README.md). A failure prints the
 * line that replays it (CTL_MODEL_SEED, CTL_MODEL_PATH, CTL_MODEL_REPLAY).
 */
import { test } from 'uvu';
import { formatStats, runModel } from './spend-harness.js';

const RUNS = 1100;

test(`the SDK on the memory storage answers as the model, ${RUNS} sequences`, async () => {
  const stats = await runModel({ storage: 'memory', runs: RUNS, maxCommands: 30 });
  console.log(formatStats('memory storage', stats));
});

test.run();
