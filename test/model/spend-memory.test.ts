/**
 * The spend state machine against its model (spend-model.ts, from PROTOCOL.md), on the SDK's
 * memory SpendStorage: wallets, three merchant builds on one ledger, holds, captures, revocations,
 * delegations, restarts and clock moves (test/model/README.md). Replay a failure with the
 * CTL_MODEL_SEED / CTL_MODEL_PATH / CTL_MODEL_REPLAY line it prints.
 */
import { test } from 'uvu';
import { formatStats, runModel } from './spend-harness.js';

const RUNS = 1000;

test(`the SDK on the memory storage answers as the model, ${RUNS} sequences`, async () => {
  const stats = await runModel({ storage: 'memory', runs: RUNS, maxCommands: 25 });
  console.log(formatStats('memory storage', stats));
});

test.run();
