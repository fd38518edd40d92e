/**
 * The sequencer (log.ts): numbers committed pending entries under the log's lock, one transaction
 * per pass (entries, tiles, tree), at most one pass at a time per process and one at a time across
 * processes. It remembers the indices its own passes gave (a paid answer finds its receipt's index
 * without a query) and the tree it last wrote (whose right edge it need not hash again).
 */
import type { SqlDatabase, SqlExecutor } from '../database.js';
import { leafHash, treeRoot } from '../../src/entries/log.js';
import { HASH_SIZE, appendToTiles, partialTiles, type Tile } from './tiles.js';
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
  // The tree this process last wrote, with its right edge: the next pass extends it without
  // reading or hashing that edge again (only while the stored tree is still exactly that one).
  let lastWritten: { size: number; root: Buffer; edge: Tile[] } | undefined;

  /** One sequencing transaction: up to `batch` pending entries numbered; resolves to the new size and how many. */
  async function integrate(): Promise<{ size: number; added: number }> {
    const r = await db.tx(
      async (q) => {
        const taken = await takePending(q, p, batch);
        if (!taken) return { size: (await tiles.tree(q)).size, added: 0 };
        const { tree: t, pending } = taken;
        const known = lastWritten && lastWritten.size === t.size && lastWritten.root.equals(t.root);
        const edge = known ? lastWritten!.edge : await readEdge(q, p, t.size);
        const edgeMap = new Map(edge.map((e) => [`${e.level}/${e.n}`, e]));
        // The stored right edge must give the stored root: never extend a tree that does not add up
        // (checked whenever another writer, or nobody in this process, wrote the tree last).
        if (!known && !Buffer.from(await treeRoot(t.size, tiles.hashes(t.size, q, edgeMap))).equals(t.root))
          throw new Error(`${p}: the stored tiles do not hash to the stored root at size ${t.size}`);
        const leaves = pending.map((e) => Buffer.from(leafHash(Buffer.from(e.entry, 'utf8'))));
        const touched = appendToTiles(t.size, edge, leaves);
        const size = t.size + pending.length;
        for (const x of touched) edgeMap.set(`${x.level}/${x.n}`, x);
        const root = Buffer.from(await treeRoot(size, tiles.hashes(size, q, edgeMap)));
        const numbered = pending.map((e, i) => [t.size + i, e.ref, e.entry] as const);
        await writePass(q, p, { numbered, touched, from: t.size, size, root });
        const nextEdge = partialTiles(size).map((w) => {
          const x = edgeMap.get(`${w.level}/${w.n}`)!;
          return { ...x, width: w.width, hashes: x.hashes.subarray(0, w.width * HASH_SIZE) };
        });
        return { size, added: pending.length, written: { root, edge: nextEdge, numbered } };
      },
      { lock: `${p}_sequencer` },
    );
    // Only once committed: a pass that rolled back gave no index.
    if (r.written) {
      lastWritten = { size: r.size, root: r.written.root, edge: r.written.edge };
      for (const [idx, ref] of r.written.numbered) remember(ref, idx);
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

interface Pending {
  id: unknown;
  ref: string | null;
  entry: string;
}

/**
 * Takes up to `batch` committed pending entries, in id order, with the tree they extend; undefined
 * when none. One statement deletes exactly the rows it returns, undone if the pass rolls back (a
 * row committed meanwhile waits for the next pass).
 */
async function takePending(
  q: SqlExecutor,
  p: string,
  batch: number,
): Promise<{ tree: { size: number; root: Buffer }; pending: Pending[] } | undefined> {
  const take = `DELETE FROM ${p}_pending WHERE id IN (SELECT id FROM ${p}_pending ORDER BY id LIMIT ${batch})
    RETURNING id, ref, entry`;
  let rows: Array<Pending & { size: unknown; root: unknown }>;
  if (q.dialect === 'postgres') {
    rows = await q.all(
      `WITH d AS (${take}) SELECT d.id, d.ref, d.entry, t.size, t.root FROM d, ${p}_tree t WHERE t.id = 1`,
    );
  } else {
    const pending = await q.all<Pending>(take);
    if (pending.length === 0) return undefined;
    const t = await q.get<{ size: unknown; root: unknown }>(`SELECT size, root FROM ${p}_tree WHERE id = 1`);
    rows = pending.map((e) => ({ ...e, size: t!.size, root: t!.root }));
  }
  if (rows.length === 0) return undefined;
  rows.sort((x, y) => Number(x.id) - Number(y.id));
  return { tree: { size: Number(rows[0]!.size), root: asBuffer(rows[0]!.root) }, pending: rows };
}

/** The right-edge tiles of a tree of `size` leaves, read in one statement, each exactly as wide as the tree needs. */
async function readEdge(q: SqlExecutor, p: string, size: number): Promise<Tile[]> {
  const wanted = partialTiles(size);
  if (wanted.length === 0) return [];
  const rows = await q.all<{ level: unknown; n: unknown; width: unknown; hashes: unknown }>(
    `SELECT level, n, width, hashes FROM ${p}_tiles WHERE ${wanted.map(() => '(level = ? AND n = ?)').join(' OR ')}`,
    wanted.flatMap((w) => [w.level, w.n]),
  );
  return wanted.map((want) => {
    const got = rows.find((r) => Number(r.level) === want.level && Number(r.n) === want.n);
    if (!got || Number(got.width) !== want.width)
      throw new Error(`${p}: tile ${want.level}/${want.n} has ${got?.width ?? 0} hashes, the tree needs ${want.width}`);
    return { ...want, hashes: asBuffer(got.hashes).subarray(0, want.width * HASH_SIZE) };
  });
}

/**
 * A pass's writes: its entries, the tiles they changed and the new tree, conditional on the tree
 * it read. On PostgreSQL one statement (arrays, so its text never changes); on SQLite, in process,
 * a few.
 */
async function writePass(
  q: SqlExecutor,
  p: string,
  w: {
    numbered: ReadonlyArray<readonly [number, string | null, string]>;
    touched: Tile[];
    from: number;
    size: number;
    root: Buffer;
  },
): Promise<void> {
  const upsert = `ON CONFLICT (level, n) DO UPDATE SET width = excluded.width, hashes = excluded.hashes`;
  let moved: { changes: number };
  if (q.dialect === 'postgres') {
    moved = await q.run(
      `WITH e AS (INSERT INTO ${p}_entries (idx, ref, entry) SELECT * FROM unnest(?::bigint[], ?::text[], ?::text[])),
       ti AS (INSERT INTO ${p}_tiles (level, n, width, hashes)
         SELECT * FROM unnest(?::int[], ?::bigint[], ?::int[], ?::bytea[]) ${upsert})
       UPDATE ${p}_tree SET size = ?, root = ? WHERE id = 1 AND size = ?`,
      [
        w.numbered.map((e) => String(e[0])),
        w.numbered.map((e) => e[1]),
        w.numbered.map((e) => e[2]),
        w.touched.map((x) => x.level),
        w.touched.map((x) => String(x.n)),
        w.touched.map((x) => x.width),
        w.touched.map((x) => x.hashes),
        w.size,
        w.root,
        w.from,
      ],
    );
  } else {
    for (const c of chunks(w.numbered))
      await q.run(`INSERT INTO ${p}_entries (idx, ref, entry) VALUES ${c.map(() => '(?, ?, ?)').join(', ')}`, c.flat());
    for (const c of chunks(w.touched))
      await q.run(
        `INSERT INTO ${p}_tiles (level, n, width, hashes) VALUES ${c.map(() => '(?, ?, ?, ?)').join(', ')} ${upsert}`,
        c.flatMap((x) => [x.level, x.n, x.width, x.hashes]),
      );
    moved = await q.run(`UPDATE ${p}_tree SET size = ?, root = ? WHERE id = 1 AND size = ?`, [w.size, w.root, w.from]);
  }
  if (moved.changes !== 1) throw new Error(`${p}: the tree moved under the sequencer's lock`);
}
