/**
 * The sequencer (log.ts): numbers committed pending entries under the log's lock, one transaction
 * per pass (entries, tiles, tree), at most one pass at a time per process and one at a time across
 * processes. It remembers the indices its own passes gave (a paid answer finds its receipt's index
 * without a query) and the tree it last wrote (whose right edge it need not hash again).
 */
import type { SqlDatabase } from '../database.js';
import { HASH_SIZE, leafHash, treeRoot } from './merkle.js';
import { appendToTiles, partialTiles, type Tile } from './tiles.js';
import { asBuffer, chunks, type TileStore } from './store.js';

export interface Sequencer {
  /** Integrates every committed pending entry; resolves to the tree size after a pass that started after the call. */
  sequence(): Promise<number>;
  /** A pass soon, not waited for. */
  kick(): void;
  /** The index a pass of this process gave `ref`, if it remembers it. */
  remembered(ref: string): number | undefined;
  /** Resolves when the pass running now (if any) is over. */
  settled(): Promise<void>;
  close(): Promise<void>;
}

export function createSequencer(o: {
  db: SqlDatabase;
  prefix: string;
  tiles: TileStore;
  batch: number;
  gapMs: number;
}): Sequencer {
  const { db, prefix: p, tiles, batch, gapMs } = o;
  let closed = false;
  // The indices this process's passes gave, by ref (bounded): a paid answer finds its receipt's
  // index here without a query.
  const recent = new Map<string, number>();
  const remember = (ref: string | null, idx: number) => {
    if (ref === null) return;
    recent.set(ref, idx);
    if (recent.size > 16384) recent.delete(recent.keys().next().value as string);
  };
  // The tree this process last wrote: its tiles need no re-check before the next pass extends it.
  let lastWritten: { size: number; root: Buffer } | undefined;

  /** One sequencing transaction: up to `batch` pending entries numbered; resolves to the new size and how many. */
  async function integrate(): Promise<{ size: number; added: number }> {
    const r = await db.tx(
      async (q) => {
        const t = await tiles.tree(q);
        // Taken in one statement: exactly the rows read are deleted, and only if this transaction
        // commits with their numbering (a row committed meanwhile waits for the next pass).
        const pending = (
          await q.all<{ id: unknown; ref: string | null; entry: string }>(
            `DELETE FROM ${p}_pending WHERE id IN (SELECT id FROM ${p}_pending ORDER BY id LIMIT ${batch})
             RETURNING id, ref, entry`,
          )
        ).sort((x, y) => Number(x.id) - Number(y.id));
        if (pending.length === 0) return { size: t.size, root: undefined, added: 0, numbered: undefined };
        const edge: Tile[] = [];
        const wanted = partialTiles(t.size);
        // The right edge in one statement (full tiles of it come from the cache).
        const where = wanted.map(() => '(level = ? AND n = ?)').join(' OR ');
        const rows = wanted.length
          ? await q.all<{ level: unknown; n: unknown; width: unknown; hashes: unknown }>(
              `SELECT level, n, width, hashes FROM ${p}_tiles WHERE ${where}`,
              wanted.flatMap((w) => [w.level, w.n]),
            )
          : [];
        const stored = new Map(
          rows.map((r) => [
            `${Number(r.level)}/${Number(r.n)}`,
            { level: Number(r.level), n: Number(r.n), width: Number(r.width), hashes: asBuffer(r.hashes) },
          ]),
        );
        for (const want of wanted) {
          const got = stored.get(`${want.level}/${want.n}`);
          if (!got || got.width !== want.width)
            throw new Error(
              `${p}: tile ${want.level}/${want.n} has ${got?.width ?? 0} hashes, the tree needs ${want.width}`,
            );
          edge.push({ ...got, width: want.width, hashes: got.hashes.subarray(0, want.width * HASH_SIZE) });
        }
        const edgeMap = new Map(edge.map((e) => [`${e.level}/${e.n}`, e]));
        // The stored right edge must give the stored root: never extend a tree that does not add up
        // (checked whenever another writer, or nobody in this process, wrote the tree last).
        const known = lastWritten && lastWritten.size === t.size && lastWritten.root.equals(t.root);
        if (!known && !(await treeRoot(tiles.reader(q, edgeMap), t.size)).equals(t.root))
          throw new Error(`${p}: the stored tiles do not hash to the stored root at size ${t.size}`);
        const leaves = pending.map((e) => leafHash(Buffer.from(e.entry, 'utf8')));
        const touched = appendToTiles(t.size, edge, leaves);
        const size = t.size + pending.length;
        for (const x of touched) edgeMap.set(`${x.level}/${x.n}`, x);
        const root = await treeRoot(tiles.reader(q, edgeMap), size);
        const numbered = pending.map((e, i) => [t.size + i, e.ref, e.entry] as const);
        for (const c of chunks(numbered))
          await q.run(
            `INSERT INTO ${p}_entries (idx, ref, entry) VALUES ${c.map(() => '(?, ?, ?)').join(', ')}`,
            c.flat(),
          );
        for (const c of chunks(touched))
          await q.run(
            `INSERT INTO ${p}_tiles (level, n, width, hashes) VALUES ${c.map(() => '(?, ?, ?, ?)').join(', ')}
             ON CONFLICT (level, n) DO UPDATE SET width = excluded.width, hashes = excluded.hashes`,
            c.flatMap((x) => [x.level, x.n, x.width, x.hashes]),
          );
        const moved = await q.run(`UPDATE ${p}_tree SET size = ?, root = ? WHERE id = 1 AND size = ?`, [
          size,
          root,
          t.size,
        ]);
        if (moved.changes !== 1) throw new Error(`${p}: the tree moved under the sequencer's lock`);
        return { size, root, added: pending.length, numbered };
      },
      { lock: `${p}_sequencer` },
    );
    // Only once committed: a pass that rolled back gave no index.
    if (r.added > 0) {
      lastWritten = { size: r.size, root: r.root! };
      for (const [idx, ref] of r.numbered!) remember(ref, idx);
    }
    return { size: r.size, added: r.added };
  }

  // One pass at a time per process; a caller arriving during a pass waits for the next one, which
  // sees every entry committed before that caller asked.
  let running: Promise<number> | undefined;
  let queued: Promise<number> | undefined;
  // Passes start at most every `gapMs`: under load one pass numbers the entries of many commits
  // (each pass is a transaction of several statements), at the price of that much latency.
  let lastStart = 0;
  const runPass = async (): Promise<number> => {
    const wait = lastStart + gapMs - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    lastStart = performance.now();
    for (;;) {
      const r = await integrate();
      if (r.added < batch || closed) return r.size;
    }
  };
  function sequence(): Promise<number> {
    if (!running) {
      running = runPass().finally(() => {
        running = undefined;
      });
      return running;
    }
    if (!queued) {
      queued = running
        .catch(() => 0)
        .then(() => {
          queued = undefined;
          return sequence();
        });
    }
    return queued;
  }

  let kicked = false;
  return {
    sequence,
    kick() {
      if (kicked || closed) return;
      kicked = true;
      setImmediate(() => {
        kicked = false;
        sequence().catch(() => {});
      });
    },
    remembered: (ref) => recent.get(ref),
    settled: async () => {
      await running?.catch(() => {});
    },
    async close() {
      closed = true;
      await running?.catch(() => {});
    },
  };
}
