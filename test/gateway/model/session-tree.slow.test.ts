/**
 * The session-tree model (session-tree.ts) at length, on SQLite and on PostgreSQL (a fresh schema):
 * `CTL_MODEL_RUNS` trees (default 60 per engine, about 4 minutes here) of up to 40 commands. A failing run prints
 * `CTL_MODEL_SEED` and `CTL_MODEL_PATH` to replay it (`CTL_MODEL_SHRINK=1` shrinks it first).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { sqliteDb, postgresDb } from '../helpers.js';
import { runSessionTreeModel, startStand } from './session-tree.js';

const numRuns = Number(process.env.CTL_MODEL_RUNS) || 60;

for (const engine of ['SQLite', 'PostgreSQL'] as const) {
  test(`${engine}: ${numRuns} session trees against the model`, async () => {
    const db = engine === 'SQLite' ? sqliteDb() : await postgresDb('the session-tree model on PostgreSQL');
    if (!db) return;
    const stand = await startStand(db);
    try {
      const r = await runSessionTreeModel(stand, { numRuns, maxCommands: 40, label: `session tree on ${engine}` });
      assert.ok(r.steps > 0);
      console.log(`session tree on ${engine}: ${r.runs} runs, ${r.steps} steps: ${r.seen}`);
    } finally {
      await stand.close();
    }
  });
}

test.run();
