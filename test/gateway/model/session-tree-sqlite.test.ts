/**
 * The session-tree model (session-tree.ts) on SQLite: the fast tier's share. More runs in
 * session-tree.slow.test.ts; a failing run prints `CTL_MODEL_SEED` and `CTL_MODEL_PATH` to replay it.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { sqliteDb } from '../helpers.js';
import { runSessionTreeModel, startStand, type Stand } from './session-tree.js';

let stand: Stand;
test.before(async () => {
  stand = await startStand(sqliteDb());
});
test.after(() => stand.close());

test('SQLite: a session tree never passes a ceiling or a window, and spends what its receipts say', async () => {
  const r = await runSessionTreeModel(stand, { numRuns: 15, maxCommands: 25, label: 'session tree on SQLite' });
  assert.ok(r.steps > 0);
  console.log(`session tree on SQLite: ${r.runs} runs, ${r.steps} steps: ${r.seen}`);
});

test.run();
