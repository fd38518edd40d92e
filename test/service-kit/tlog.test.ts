/**
 * The services' transparency log (service-kit/tlog) on SQLite and on PostgreSQL (a fresh schema),
 * checked against a from-scratch reference (test/helpers/tlog-reference.ts), never against its
 * own code: two instances on one database append 200 entries in parallel transactions while both
 * sequence and sign, and the result has no gap, no duplicate, every checkpoint signed, consistent
 * with every later one and equal to the reference root; a rolled-back record leaves no entry; the
 * served tiles and entry bundles equal the reference tiles; inclusion proofs are the RFC's. A
 * witness cosigns only consistent checkpoints and detects a split view.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { migrate, openDatabase, type SqlDatabase } from '../../service-kit/index.js';
import {
  COSIGNATURE_V1,
  createTransparencyLog,
  createWitness,
  generateNoteSigner,
  serviceLogMigrations,
  witnessRound,
  type NoteSigner,
  type SplitView,
  type TransparencyLog,
} from '../../service-kit/tlog/index.js';
import { parseEntryBundle, signCheckpoint } from '../../src/entries/log.js';
import { PG_URL, dropSchema, freshSchema, pgAvailable } from './pg-fixture.js';
import {
  refConsistency,
  refHasCosignature,
  refLeafHash,
  refOpenCheckpoint,
  refPath,
  refRoot,
  refTiles,
  refVerifyInclusion,
} from '../helpers/tlog-reference.js';

const P = 't_log';
const MIGRATIONS = [
  ...serviceLogMigrations(P),
  ...serviceLogMigrations('w_log'),
  { id: 'things', sql: 'CREATE TABLE things (id TEXT PRIMARY KEY)' },
];

interface Pair {
  a: SqlDatabase;
  b: SqlDatabase;
  close(): Promise<void>;
}

async function sqlitePair(): Promise<Pair> {
  const dir = mkdtempSync(join(tmpdir(), 'ctl-tlog-'));
  const a = await openDatabase(`sqlite:${join(dir, 'log.db')}`);
  await migrate(a, MIGRATIONS);
  const b = await openDatabase(`sqlite:${join(dir, 'log.db')}`);
  return {
    a,
    b,
    async close() {
      await a.close();
      await b.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function postgresPair(): Promise<Pair> {
  const schema = freshSchema();
  const a = await openDatabase(PG_URL, { schema, poolSize: 8 });
  await migrate(a, MIGRATIONS);
  const b = await openDatabase(PG_URL, { schema, poolSize: 8 });
  return {
    a,
    b,
    async close() {
      await a.close();
      await b.close();
      await dropSchema(schema);
    },
  };
}

/** `n` records, each with its log entry in its own transaction, spread over the instances. */
function appendMany(dbs: SqlDatabase[], logs: TransparencyLog[], from: number, n: number) {
  return Promise.all(
    Array.from({ length: n }, (_, j) => {
      const i = from + j;
      return dbs[i % dbs.length]!.tx(async (q) => {
        await q.run('INSERT INTO things (id) VALUES (?)', [`t${i}`]);
        await logs[i % logs.length]!.append(q, { type: 'thing', body: { i, note: 'x'.repeat(i % 7) } }, `thing:${i}`);
      });
    }),
  );
}

async function entries(db: SqlDatabase) {
  const rows = await db.all<{ idx: unknown; ref: string; entry: string }>(
    `SELECT idx, ref, entry FROM ${P}_entries ORDER BY idx`,
  );
  return rows.map((r) => ({ idx: Number(r.idx), ref: r.ref, entry: r.entry }));
}

async function checkAgainstReference(db: SqlDatabase, log: TransparencyLog, signer: NoteSigner) {
  const all = await entries(db);
  const leaves = all.map((e) => refLeafHash(Buffer.from(e.entry, 'utf8')));
  const checkpoints = (
    await db.all<{ size: unknown; note: string }>(`SELECT size, note FROM ${P}_checkpoints ORDER BY size`)
  ).map((c) => ({ size: Number(c.size), note: c.note }));
  assert.ok(checkpoints.length >= 2, `several checkpoints were signed (${checkpoints.length})`);
  for (const c of checkpoints) {
    const opened = refOpenCheckpoint(c.note, signer.vkey);
    assert.is(opened.origin, signer.name);
    assert.is(opened.size, c.size);
    assert.ok(opened.root.equals(refRoot(leaves.slice(0, c.size))), `checkpoint ${c.size}: the reference root`);
  }
  // Every checkpoint is consistent with every later one: the served proof is the RFC's.
  for (let i = 0; i < checkpoints.length; i++)
    for (let j = i + 1; j < checkpoints.length; j += Math.max(1, Math.floor(checkpoints.length / 5))) {
      const [m, n] = [checkpoints[i]!.size, checkpoints[j]!.size];
      const served = await log.consistency(m, n);
      const ref = refConsistency(m, leaves.slice(0, n));
      assert.equal(
        served.map((h) => h.toString('hex')),
        ref.map((h) => h.toString('hex')),
        `consistency ${m} → ${n}`,
      );
    }
  // Inclusion proofs verify against the checkpoints' roots.
  const last = checkpoints[checkpoints.length - 1]!;
  for (const index of [0, 1, Math.floor(last.size / 2), last.size - 1]) {
    const p = await log.inclusion(index, last.size);
    assert.equal(
      p.hashes.map((h) => h.toString('hex')),
      refPath(index, leaves.slice(0, last.size)).map((h) => h.toString('hex')),
    );
    assert.ok(refVerifyInclusion(index, last.size, leaves[index]!, p.hashes, refRoot(leaves.slice(0, last.size))));
  }
  return { all, leaves };
}

async function suite(name: string, open: () => Promise<Pair>) {
  test(`${name}: two instances, 200 parallel appends: gapless, unique, every checkpoint consistent`, async () => {
    const pair = await open();
    try {
      const signer = await generateNoteSigner('log.example/ctl-test-log');
      const logs = [pair.a, pair.b].map((db) => createTransparencyLog({ db, prefix: P, signer, batch: 16 }));
      let appending = true;
      // Both instances sequence and sign while the appends run.
      const publishers = logs.map(async (log) => {
        while (appending) {
          await log.publish();
          await new Promise((r) => setTimeout(r, 3));
        }
      });
      // A record that rolls back leaves no entry, and an entry never outlives its record.
      await pair.a
        .tx(async (q) => {
          await logs[0]!.append(q, { type: 'thing', body: { rolledBack: true } }, 'thing:rolled-back');
          throw new Error('roll back');
        })
        .catch(() => {});
      await appendMany([pair.a, pair.b], logs, 0, 200);
      appending = false;
      await Promise.all(publishers);
      await logs[1]!.publish();
      const { all } = await checkAgainstReference(pair.a, logs[0]!, signer);
      assert.is(all.length, 200);
      all.forEach((e, i) => assert.is(e.idx, i, 'no gap'));
      assert.is(new Set(all.map((e) => e.ref)).size, 200, 'no duplicate');
      assert.not.ok(all.some((e) => e.ref === 'thing:rolled-back'));
      const left = await pair.a.get<{ n: unknown }>(`SELECT COUNT(*) AS n FROM ${P}_pending`);
      assert.is(Number(left!.n), 0, 'none left pending');
      // A leaf never changes.
      let refused = false;
      await pair.a.run(`UPDATE ${P}_entries SET entry = 'x' WHERE idx = 0`).catch(() => (refused = true));
      assert.ok(refused, 'an UPDATE of an entry is refused');
      for (const log of logs) await log.close();
    } finally {
      await pair.close();
    }
  });

  test(`${name}: served tiles and entry bundles equal a from-scratch recomputation`, async () => {
    const pair = await open();
    try {
      const signer = await generateNoteSigner('log.example/ctl-tiles');
      const log = createTransparencyLog({ db: pair.a, prefix: P, signer, batch: 100 });
      // 600 entries: two full level-0 tiles, a partial one, and a partial level-1 tile.
      for (let from = 0; from < 600; from += 150) {
        await appendMany([pair.a], [log], from, 150);
        await log.publish();
      }
      const { all, leaves } = await checkAgainstReference(pair.a, log, signer);
      assert.is(all.length, 600);
      for (const [key, bytes] of refTiles(leaves)) {
        const m = /^(\d+)\/(\d+)(?:\.p\/(\d+))?$/.exec(key)!;
        const served = await log.tile(Number(m[1]), Number(m[2]), m[3] ? Number(m[3]) : 256);
        assert.ok(served?.equals(bytes), `tile ${key}`);
      }
      // A partial view of a full tile is its prefix; a width beyond the tree is not served.
      assert.ok((await log.tile(0, 0, 10))!.equals(Buffer.concat(leaves.slice(0, 10))));
      assert.is(await log.tile(0, 2, 100), undefined);
      for (const [n, width] of [
        [0, 256],
        [1, 256],
        [2, 88],
      ] as const) {
        const bundle = parseEntryBundle((await log.entryBundle(n, width))!).map((e) => Buffer.from(e));
        assert.is(bundle.length, width);
        bundle.forEach((e, i) => assert.ok(refLeafHash(e).equals(leaves[n * 256 + i]!), `bundle ${n} entry ${i}`));
      }
      await log.close();
    } finally {
      await pair.close();
    }
  });

  test(`${name}: a witness cosigns consistent checkpoints and detects a split view`, async () => {
    const pair = await open();
    const fork = await open();
    try {
      const signer = await generateNoteSigner('log.example/ctl-witnessed');
      const wSigner = await generateNoteSigner('witness.example/w1', COSIGNATURE_V1);
      const seen: SplitView[] = [];
      const witness = createWitness({
        db: pair.b,
        prefix: 'w_log',
        signer: wSigner,
        logs: [signer.vkey],
        onSplitView: (s) => seen.push(s),
      });
      // The witness's HTTP interface, in process.
      const viaWitness = (async (_url: string, init: RequestInit) => {
        const a = await witness.addCheckpoint(String(init.body));
        return new Response(a.body, { status: a.status, headers: { 'content-type': a.contentType } });
      }) as typeof fetch;
      const witnesses = witnessRound({
        db: pair.a,
        prefix: P,
        logVkey: signer.vkey,
        witnesses: [{ url: 'http://witness.test', vkey: wSigner.vkey }],
        fetch: viaWitness,
      });
      const log = createTransparencyLog({ db: pair.a, prefix: P, signer, witnesses });
      for (const n of [5, 9, 30]) {
        await appendMany([pair.a], [log], (await log.tree()).size, n - (await log.tree()).size);
        await log.publish();
        const c = (await log.checkpoint())!;
        assert.is(c.size, n);
        assert.ok(refHasCosignature(c.note, wSigner.vkey), `checkpoint ${n} cosigned`);
      }
      assert.is((await witness.status()).logs[0]!.size, 30, 'the witness keeps the size it cosigned');
      // A proof that does not verify is refused; an old size that is not the witness's is 409 with its size.
      const note30 =
        (await log.checkpointAt(30))!.split('\n\n')[0] +
        '\n\n' +
        (await log.checkpointAt(30))!.split('\n\n')[1]!.split('\n')[0] +
        '\n';
      const wrong = await witness.addCheckpoint(`old 9\n${Buffer.alloc(32).toString('base64')}\n\n${note30}`);
      assert.is(wrong.status, 409);
      assert.is(wrong.body, '30\n');
      await appendMany([pair.a], [log], 30, 3);
      await log.sequence();
      const t = await log.tree();
      const note33 = await signCheckpoint({ origin: signer.name, size: t.size, rootHash: t.root }, [signer.note!]);
      const badProof = await witness.addCheckpoint(`old 30\n${Buffer.alloc(32).toString('base64')}\n\n${note33}`);
      assert.is(badProof.status, 422);
      assert.is((await witness.addCheckpoint(`old 0\n\n${note33.replace('ctl-witnessed', 'other')}`)).status, 404);
      const forged = await generateNoteSigner(signer.name);
      const notByLog = await signCheckpoint({ origin: signer.name, size: t.size, rootHash: t.root }, [forged.note!]);
      assert.is((await witness.addCheckpoint(`old 30\n\n${notByLog}`)).status, 403);
      // A fork: the same key signs another tree of size 30.
      const forkLog = createTransparencyLog({ db: fork.a, prefix: P, signer });
      await appendMany([fork.a], [forkLog], 1000, 30);
      await forkLog.publish();
      const forkNote = (await forkLog.checkpoint())!.note;
      const split = await witness.addCheckpoint(`old 30\n\n${forkNote}`);
      assert.is(split.status, 409);
      assert.is(seen.length, 1, 'the split view is told');
      assert.is(seen[0]!.size, 30);
      const status = await witness.status();
      assert.is(status.splitViews.length, 1);
      assert.is(status.splitViews[0]!.noteB, forkNote);
      await log.close();
      await forkLog.close();
    } finally {
      await pair.close();
      await fork.close();
    }
  });
}

await suite('SQLite', sqlitePair);
if (await pgAvailable()) await suite('PostgreSQL', postgresPair);
else console.log(`SKIPPED PostgreSQL: ${PG_URL} is unreachable`);

test.run();
