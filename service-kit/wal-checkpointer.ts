/**
 * SQLite WAL checkpoints on a worker thread, with a connection of its own, instead of inside a
 * COMMIT on the event loop. Left to SQLite, the COMMIT that takes the WAL past 1,000 pages copies
 * the WAL into the database and fsyncs both while every request of the process waits (the soak's
 * p99 rising with the WAL). Here the writer's connection has `wal_autocheckpoint = 0` and the
 * worker runs `wal_checkpoint(PASSIVE)` once 1,000 frames wait to be copied (as SQLite would):
 * PASSIVE never takes the writer's lock, so commits go on while it copies.
 *
 * Under steady writes a PASSIVE pass never catches up with the end of the WAL, and SQLite starts
 * the WAL again from the top only once all of it has been copied, so the file would grow without
 * end. When a pass finds the WAL past `restartPages`, the worker asks the writer for a window: the
 * writer's side claims its connection (no transaction open; the event loop runs on, only the
 * database queue waits), the worker runs `wal_checkpoint(RESTART)`, which has only the last few
 * frames left to copy, and the claim ends. The next commit then writes the WAL from the top.
 *
 * Checkpoints sync the WAL before copying and the database after, as SQLite's own do: nothing
 * here changes durability. If the worker cannot start or stops, the writer's connection
 * checkpoints itself again (SQLite's default of 1,000 pages), so the WAL never grows unbounded.
 */
import { Worker } from 'node:worker_threads';
import { createRequire } from 'node:module';

/** The worker's body (eval'd, CommonJS): better-sqlite3 is loaded from the path the main thread resolved. */
const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const { closeSync, openSync, readSync } = require('node:fs');
const Database = require(workerData.driver);
const db = new Database(workerData.path);
db.pragma('busy_timeout = 1000');
let stopped = false;
let waiting = false;
let shm;
const header = Buffer.alloc(104);
// Frames in the WAL not yet copied into the database, from the wal-index header in the -shm file
// (SQLite file format §4.3: mxFrame at byte 16, nBackfill at byte 96, native byte order), so a
// pass runs only once there is something worth copying: a checkpoint costs two fsyncs, which
// would otherwise compete with the commits' own flushes. Unknown: a pass every 100 ms.
const pending = () => {
  try {
    shm ??= openSync(workerData.path + '-shm', 'r');
    if (readSync(shm, header, 0, 104, 0) < 104) return undefined;
    // iVersion 3007000 tells the byte order; any other value: a format this does not know.
    const le = header.readUInt32LE(0) === 3007000;
    if (!le && header.readUInt32BE(0) !== 3007000) return undefined;
    const mx = le ? header.readUInt32LE(16) : header.readUInt32BE(16);
    const done = le ? header.readUInt32LE(96) : header.readUInt32BE(96);
    return mx >= done ? mx - done : undefined;
  } catch { return undefined; }
};
const checkpoint = (mode) => {
  try {
    return db.pragma('wal_checkpoint(' + mode + ')')[0];
  } catch (e) {
    if (e && e.code === 'SQLITE_BUSY') return undefined;
    throw e;
  }
};
parentPort.on('message', (m) => {
  if (m === 'stop') stopped = true;
  else if (m === 'window') {
    // The writer holds no transaction now: copy what is left and start the WAL again.
    const r = checkpoint('RESTART');
    waiting = false;
    parentPort.postMessage({ restarted: r });
  }
});
let lastPass = 0;
const tick = () => {
  if (stopped) {
    // A descriptor belongs to the process, not this worker: closed here or leaked per database.
    if (shm !== undefined) closeSync(shm);
    db.close(); parentPort.postMessage('stopped'); return;
  }
  if (!waiting) {
    const n = pending();
    if (n === undefined ? Date.now() - lastPass >= 100 : n >= workerData.checkpointPages) {
      lastPass = Date.now();
      const r = checkpoint('PASSIVE');
      if (workerData.reportPasses) parentPort.postMessage({ pass: n ?? null });
      if (r && r.log >= workerData.restartPages) { waiting = true; parentPort.postMessage('window?'); }
    }
  }
  setTimeout(tick, workerData.intervalMs);
};
tick();
`;

export interface WalCheckpointer {
  close(): Promise<void>;
}

export interface WalCheckpointerOptions {
  /** Turns the writer connection's own checkpoints (wal_autocheckpoint) off, or on again as a fallback. */
  selfCheckpoint(on: boolean): void;
  /** Takes the writer connection (no transaction open) until the returned release is called. */
  claim(): Promise<() => void>;
  /** How often the worker looks at the WAL (default 10 ms). */
  intervalMs?: number;
  /** Frames not yet copied that make a pass worth its two fsyncs (default 1,000, SQLite's own). */
  checkpointPages?: number;
  /** WAL pages past which a restart window is asked for (default 4,000: 16 MB of 4 KB pages). */
  restartPages?: number;
  /** Told after each pass the frames the wal-index header said were waiting (undefined: unread, a timed pass). */
  onPass?(pending: number | undefined): void;
}

/** How long close() waits for the worker to close its connection before terminating it. */
const STOP_WAIT_MS = 500;
/** How long a restart window may hold the writer's queue before it is given back regardless. */
const WINDOW_LIMIT_MS = 2000;

/**
 * @example const cp = startWalCheckpointer('./data/gateway.db', { selfCheckpoint, claim }); … await cp.close()
 */
export function startWalCheckpointer(path: string, o: WalCheckpointerOptions): WalCheckpointer {
  let worker: Worker;
  try {
    const driver = createRequire(import.meta.url).resolve('better-sqlite3');
    worker = new Worker(WORKER, {
      eval: true,
      workerData: {
        path,
        driver,
        intervalMs: o.intervalMs ?? 10,
        checkpointPages: o.checkpointPages ?? 1000,
        restartPages: o.restartPages ?? 4000,
        reportPasses: o.onPass !== undefined,
      },
    });
  } catch {
    return { close: async () => {} };
  }
  o.selfCheckpoint(false);
  let closing = false;
  let failed = false;
  let endWindow: (() => void) | undefined;
  // A worker that fails (or exits) hands checkpoints back to the writer's connection.
  const fallBack = () => {
    endWindow?.();
    if (closing || failed) return;
    failed = true;
    o.selfCheckpoint(true);
  };
  worker.on('error', fallBack);
  worker.on('exit', fallBack);
  worker.on('message', (m) => {
    if (m === 'window?') {
      void o.claim().then((release) => {
        if (closing || failed) return release();
        const timer = setTimeout(() => endWindow?.(), WINDOW_LIMIT_MS);
        endWindow = () => {
          endWindow = undefined;
          clearTimeout(timer);
          release();
        };
        worker.postMessage('window');
      });
    } else if (typeof m === 'object' && m && 'restarted' in m) endWindow?.();
    else if (typeof m === 'object' && m && 'pass' in m) o.onPass?.((m as { pass: number | null }).pass ?? undefined);
  });
  worker.unref();
  return {
    async close() {
      if (closing) return;
      closing = true;
      endWindow?.();
      if (failed) return;
      // Held open until the worker has closed its connection (an unref'd worker keeps nothing alive).
      worker.ref();
      await new Promise<void>((resolve) => {
        worker.once('exit', () => resolve());
        worker.on('message', (m) => m === 'stopped' && void worker.terminate());
        worker.postMessage('stop');
        // A worker still starting (loading the driver on a busy machine) is not waited for:
        // terminate() takes effect between statements (a checkpoint under way finishes) and the
        // driver closes the worker's connection with its environment. Closing stays prompt.
        setTimeout(() => void worker.terminate(), STOP_WAIT_MS).unref();
      });
    },
  };
}
