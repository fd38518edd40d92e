/**
 * The spend state machine against its model (spend-model.ts, from PROTOCOL.md), on the SDK's
 * device's flash ledger (firmware-bridge/kv-spend-storage.ts over an in-memory byte
 * store): wallets, three merchant builds on one ledger, holds, captures, revocations,
 * delegations, restarts and clock moves (test/model/README.md). Replay a failure with the
 * CTL_MODEL_SEED / CTL_MODEL_PATH / CTL_MODEL_REPLAY line it prints.
 */
import { test } from 'uvu';
import { formatStats, runModel } from './spend-harness.js';

const RUNS = 1000;

test(`the SDK on the flash ledger answers as the model, ${RUNS} sequences`, async () => {
  const stats = await runModel({ storage: 'flash', runs: RUNS, maxCommands: 25 });
  console.log(formatStats('flash ledger', stats));
});

test.run();
