/**
 * The spend state machine against its model (spend-model.ts, from PROTOCOL.md), on the device's
 * flash ledger (firmware-bridge/kv-spend-storage.ts over an in-memory byte store): as
 * spend-memory.test.ts, every SpendStorage of the sequence being a flash ledger
 * (test/model/README.md). A failure prints the line that replays it.
 */
import { test } from 'uvu';
import { formatStats, runModel } from './spend-harness.js';

const RUNS = 900;

test(`the SDK on the flash ledger answers as the model, ${RUNS} sequences`, async () => {
  const stats = await runModel({ storage: 'flash', runs: RUNS, maxCommands: 30 });
  console.log(formatStats('flash ledger', stats));
});

test.run();
