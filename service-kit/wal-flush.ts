/**
 * The durable point of a SQLite WAL, flushed off the event loop. SQLite runs with
 * `synchronous = NORMAL`: a COMMIT writes its frames to the WAL (the OS page cache) and returns
 * without an fsync. Nobody hears of that commit until `durable(mark)` has resolved, which happens
 * only after an fdatasync of the WAL file that began after the commit's frames were written, run
 * on libuv's thread pool. The promise a caller waits for is therefore exactly what
 * `synchronous = FULL` gives (the commit is on disk before anyone is told), but while the loop is
 * busy the flush no longer blocks the one JavaScript thread, and one flush covers every commit
 * written before it began (group commit across transactions and across groups).
 *
 * Why fdatasync on our own descriptor suffices: fsync/fdatasync flush the file (the inode), not
 * the descriptor, and SQLite keeps the `-wal` file (never deletes or replaces it) while a
 * connection is open in WAL mode. The WAL header, its directory entry and checkpoints are synced
 * by SQLite itself under NORMAL. Frames of a later commit that reach the disk before an earlier
 * commit's do not matter: WAL recovery stops at the first frame whose cumulative checksum fails.
 *
 * What is held back is this connection's answers: a commit is visible to other connections as
 * soon as COMMIT returns, so a second process on the same file could act on it before the flush.
 * Both services run one process per SQLite file (authority/README.md, gateway/README.md: several
 * instances share PostgreSQL, not SQLite); the checkpoint worker's connection only copies pages.
 *
 * A failed flush may have dropped the dirty pages it could not write (Linux marks them clean), so
 * commits may be visible that will never reach the disk: the flusher then stays failed, and every
 * later `durable` rejects with that error (as PostgreSQL stops at a failed fsync). Restarting the
 * process recovers what the disk holds.
 */
import { open, fdatasync, fdatasyncSync, close } from 'node:fs';
import { loopIsBusy } from './loop-busy.js';

/** Flushes a file's data to disk, by descriptor (fs.fdatasync on the thread pool by default). */
export type FlushFile = (fd: number) => Promise<void>;

/**
 * fdatasync on the thread pool while the loop is busy; inline when it is mostly idle (a lone
 * caller would only wait longer for the hop to a pool thread and back: loop-busy.ts). `loopBusy`
 * is asked at each flush (tests pass their own).
 * @example createWalFlusher(walPath, createFdatasync(() => true)) // always on the pool
 */
export const createFdatasync =
  (loopBusy: () => boolean = loopIsBusy): FlushFile =>
  (fd) => {
    if (!loopBusy()) {
      try {
        fdatasyncSync(fd);
        return Promise.resolve();
      } catch (e) {
        return Promise.reject(e);
      }
    }
    return new Promise((resolve, reject) => fdatasync(fd, (e) => (e ? reject(e) : resolve())));
  };

export interface WalFlusher {
  /** A commit's frames were written: its mark, to wait on. */
  written(): number;
  /** The mark of the newest commit written so far (what a read may have seen). */
  readonly latest: number;
  /** Resolves once every commit up to `mark` is on disk; rejects once a flush has failed. */
  durable(mark: number): Promise<void>;
  /** The error of a failed flush, after which nothing is durable any more. */
  readonly failed: unknown;
  close(): Promise<void>;
}

/**
 * @example const wal = createWalFlusher(`${path}-wal`); db.exec('COMMIT'); await wal.durable(wal.written())
 */
export function createWalFlusher(walPath: string, flush: FlushFile = createFdatasync()): WalFlusher {
  let writtenMark = 0;
  let durableMark = 0;
  let failed: unknown;
  let fd: Promise<number> | undefined;
  let inFlight: Promise<void> | undefined;
  const waiters: Array<{ mark: number; resolve(): void; reject(e: unknown): void }> = [];

  // Opened on first use: the WAL file exists once the first commit has been written.
  const walFd = () =>
    (fd ??= new Promise<number>((resolve, reject) => open(walPath, 'r+', (e, n) => (e ? reject(e) : resolve(n)))));

  function answer() {
    for (let i = waiters.length - 1; i >= 0; i--) {
      const w = waiters[i]!;
      if (failed !== undefined) w.reject(failed);
      else if (w.mark <= durableMark) w.resolve();
      else continue;
      waiters.splice(i, 1);
    }
  }

  function start() {
    if (inFlight || failed !== undefined || !waiters.some((w) => w.mark > durableMark)) return;
    // Covers every commit written before this moment (their frames are in the page cache).
    const target = writtenMark;
    inFlight = walFd()
      .then((n) => flush(n))
      .then(
        () => {
          durableMark = Math.max(durableMark, target);
        },
        (e) => {
          failed = e ?? new Error('the WAL flush failed');
        },
      )
      .then(() => {
        inFlight = undefined;
        answer();
        start();
      });
  }

  return {
    written: () => ++writtenMark,
    get latest() {
      return writtenMark;
    },
    get failed() {
      return failed;
    },
    durable(mark) {
      if (failed !== undefined) return Promise.reject(failed);
      if (mark <= durableMark) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        waiters.push({ mark, resolve, reject });
        start();
      });
    },
    async close() {
      await inFlight;
      if (fd)
        await fd.then(
          (n) => new Promise<void>((r) => close(n, () => r())),
          () => {},
        );
      fd = undefined;
    },
  };
}
