/**
 * The session-tree model (session-tree.ts) on PostgreSQL (a fresh schema): the fast tier's share.
 * More runs in session-tree.slow.test.ts; a failing run prints `CTL_MODEL_SEED` and
 * `CTL_MODEL_PATH` to replay it.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { postgresDb } from '../helpers.js';
import { runSessionTreeModel, startStand, type Stand } from './session-tree.js';

let stand: Stand | undefined;
test.before(async () => {
  const db = await postgresDb('the session-tree model on PostgreSQL');
  if (db) stand = await startStand(db);
});
test.after(() => stand?.close());

test('PostgreSQL: a session tree never passes a ceiling or a window, and spends what its receipts say', async () => {
  if (!stand) return;
  const r = await runSessionTreeModel(stand, { numRuns: 15, maxCommands: 25, label: 'session tree on PostgreSQL' });
  assert.ok(r.steps > 0);
  console.log(`session tree on PostgreSQL: ${r.runs} runs, ${r.steps} steps: ${r.seen}`);
});

test.run();
