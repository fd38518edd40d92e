/**
 * The transparency log as a high-water mark (service-kit/tlog/high-water.ts), on real logs in
 * SQLite: a file kept with the newest checkpoint, and a witness that serves the newest it
 * cosigned, both compared with a database's log by rollbackFinding. A log behind the mark (a
 * restored backup) and a log of another history past it (a restore that went on) are findings; the
 * same log grown further is not, nor a checkpoint a witness cosigned that the log had not yet
 * marked served (a crash in between); a file not signed by the log's key is refused; a witness that
 * cannot be reached is skipped with a warning.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { migrate, openDatabase, type SqlDatabase } from '../../service-kit/index.js';
import { rollbackFinding, type ChainReader } from '../../service-kit/rollback-guard.js';
import {
  createTransparencyLog,
  generateNoteSigner,
  logCheckpointFile,
  serviceLogMigrations,
  witnessHighWater,
  type TransparencyLog,
} from '../../service-kit/tlog/index.js';
import { signCheckpoint } from '../../src/entries/log.js';

const P = 'h_log';
const dir = mkdtempSync(join(tmpdir(), 'ctl-log-hw-'));
const key = await generateNoteSigner('hw.test/ctl-log');
const dbs: SqlDatabase[] = [];
const logs: TransparencyLog[] = [];

/** A log of `n` entries named by `tag` (two tags: two histories), its newest checkpoint published. */
async function logOf(name: string, n: number, tag: string) {
  const db = await openDatabase(`sqlite:${join(dir, `${name}.db`)}`);
  dbs.push(db);
  await migrate(db, serviceLogMigrations(P));
  const log = createTransparencyLog({ db, prefix: P, signer: key });
  logs.push(log);
  await grow(log, n, tag);
  return log;
}
async function grow(log: TransparencyLog, n: number, tag: string) {
  const db = dbs[logs.indexOf(log)]!;
  const from = (await log.tree()).size;
  for (let i = from; i < from + n; i++) await db.tx(async (q) => log.append(q, { type: 'test', body: { i, tag } }));
  await log.publish();
}
// The audit chain is not what these marks are about: a chain that never objects.
const audit: ChainReader = { head: async () => undefined, hashAt: async () => undefined };

test.after(async () => {
  for (const l of logs) await l.close();
  for (const d of dbs) await d.close();
  rmSync(dir, { recursive: true, force: true });
});

test('a file kept with the newest checkpoint catches a log behind it or of another history', async () => {
  const live = await logOf('live', 10, 'a');
  const file = join(dir, 'gw.log-checkpoint');
  const mark = logCheckpointFile(live, file);
  assert.is(await mark.read(), undefined, 'no file yet: nothing to compare');
  await mark.record({ seq: 0, hash: '' });
  assert.is((await mark.read())!.seq, 10);
  assert.is(await rollbackFinding(audit, [mark]), undefined, 'the log the mark was taken from');
  await grow(live, 2, 'a');
  assert.is(await rollbackFinding(audit, [mark]), undefined, 'the same log, grown');

  // A database restored from a backup of 6 entries: its log is behind the mark.
  const restored = await logOf('restored', 6, 'a');
  const behind = await rollbackFinding(audit, [logCheckpointFile(restored, file)]);
  assert.match(behind!, 'transparency log ends at size 6');
  assert.match(behind!, 'saw size 10: it was restored from an older backup');
  // Restored, then on: 14 entries, but not the 10 the mark has.
  const forked = await logOf('forked', 14, 'b');
  assert.match((await rollbackFinding(audit, [logCheckpointFile(forked, file)]))!, 'another history');

  // A file the log's key did not sign is refused, not trusted.
  const stranger = await generateNoteSigner(key.name);
  const t = await live.tree();
  writeFileSync(file, await signCheckpoint({ origin: key.name, size: t.size, rootHash: t.root }, [stranger.note!]));
  let refused: unknown;
  await mark.read().catch((e) => (refused = e));
  assert.match(String(refused), "not a checkpoint signed by this log's key");
});

test("a witness's newest cosigned checkpoint catches a log behind it; one unreachable is skipped", async () => {
  const ahead = await logOf('witnessed', 9, 'c');
  const note = (await ahead.checkpoint())!.note;
  const warned: string[] = [];
  const serving = (async (url: string) => {
    assert.match(url, `/witness/checkpoint?origin=${encodeURIComponent(key.name)}`);
    return new Response(note);
  }) as typeof fetch;
  const behindLog = await logOf('behind', 4, 'c');
  const witness = { url: 'http://witness.test/witness', vkey: 'unused' };
  const seen = witnessHighWater(behindLog, witness, { fetch: serving, warn: (m) => warned.push(m) });
  assert.match((await rollbackFinding(audit, [seen]))!, 'the witness at http://witness.test/witness saw size 9');
  assert.is(await rollbackFinding(audit, [witnessHighWater(ahead, witness, { fetch: serving })]), undefined);
  const down = (async () => {
    throw new Error('connect ECONNREFUSED');
  }) as typeof fetch;
  const skipped = witnessHighWater(behindLog, witness, { fetch: down, warn: (m) => warned.push(m) });
  assert.is(await rollbackFinding(audit, [skipped]), undefined);
  assert.match(warned.join('\n'), 'ECONNREFUSED');
  // A checkpoint the witness cosigned just before a crash, before the log marked it served: its
  // entries are in the tree, so the database is not behind.
  await grow(behindLog, 5, 'c');
  const t = await behindLog.tree();
  assert.is((await behindLog.checkpoint())!.size, 9);
  await dbs[logs.indexOf(behindLog)]!.tx(async (q) => behindLog.append(q, { type: 'test', body: { i: 9, tag: 'c' } }));
  await behindLog.sequence();
  const cosignedOnly = await signCheckpoint(
    { origin: key.name, size: t.size + 1, rootHash: await behindLog.rootAt(t.size + 1) },
    [key.note!],
  );
  const crashed = (async () => new Response(cosignedOnly)) as typeof fetch;
  assert.is((await behindLog.checkpoint())!.size, 9, 'the newest served checkpoint is older');
  assert.is(await rollbackFinding(audit, [witnessHighWater(behindLog, witness, { fetch: crashed })]), undefined);
  const none = (async () => new Response('', { status: 404 })) as typeof fetch;
  assert.is(await witnessHighWater(behindLog, witness, { fetch: none }).read(), undefined, 'nothing cosigned yet');
});

test.run();
