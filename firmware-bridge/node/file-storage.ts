/**
 * A ByteStorage in one file, standing in for flash in the reference host and the examples.
 * Every write goes to a temporary file that is renamed over the old one, so a crash leaves the
 * old or the new content (the atomicity the ABI asks of compare-and-set).
 *
 * Several processes may share the file (two bridges, a bridge and a tool): every write runs under
 * an exclusive lock file `<path>.lock`, created with O_EXCL and holding the owner's PID, so the
 * read-compare-write of a CAS is atomic across processes and the offline bound holds. A lock
 * whose process has died is broken; one held longer than `lockTimeoutMs` by a live process is an
 * error naming it. Reads take no lock: a rename replaces the whole file at once.
 */
import {
  closeSync,
  existsSync,
  fsyncSync,
  linkSync,
  openSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { randomBytes } from 'node:crypto';
import type { ByteStorage } from '../abi.js';
import { bytesEqual } from '../abi.js';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

export interface FileByteStorageOptions {
  /** How long a write waits for another live process's lock before it throws (default 10 000 ms). */
  lockTimeoutMs?: number;
}

const pause = new Int32Array(new SharedArrayBuffer(4));
const sleep = (ms: number) => void Atomics.wait(pause, 0, 0, ms);

/** Whether process `pid` exists (EPERM: it does, owned by someone else). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Runs `fn` holding `<path>.lock` (O_EXCL create; a dead owner's lock is broken). */
function lockedBy(path: string, timeoutMs: number) {
  const lock = `${path}.lock`;
  /** Removes the lock if it still is the dead owner's `seen` content (not a newer owner's). */
  const breakStale = (seen: string) => {
    const aside = `${lock}.${process.pid}.${randomBytes(4).toString('hex')}`;
    try {
      renameSync(lock, aside);
    } catch {
      return; // gone already
    }
    if (readFileSync(aside, 'utf8') !== seen) {
      // A live owner took it between our read and the rename: put it back if nobody else has.
      try {
        linkSync(aside, lock);
      } catch {
        /* a third process holds it now */
      }
    }
    unlinkSync(aside);
  };
  return <T>(fn: () => T): T => {
    const deadline = Date.now() + timeoutMs;
    let fd: number | undefined;
    for (let wait = 1; fd === undefined; wait = Math.min(wait * 2, 25)) {
      try {
        fd = openSync(lock, 'wx');
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      }
      if (fd !== undefined) {
        try {
          writeSync(fd, `${process.pid}\n`);
        } catch (e) {
          closeSync(fd);
          unlinkSync(lock);
          throw e;
        }
        break;
      }
      let seen = '';
      try {
        seen = readFileSync(lock, 'utf8');
      } catch {
        continue; // released meanwhile
      }
      const pid = Number(seen.trim());
      // An empty lock is one being written right now, unless it has been empty for seconds.
      const dead = Number.isSafeInteger(pid) && pid > 0 ? !alive(pid) : Date.now() - mtime(lock) > 5_000;
      if (dead) {
        breakStale(seen);
        continue;
      }
      if (Date.now() >= deadline) {
        throw new Error(
          `flash file ${path} is locked by process ${seen.trim() || '(unknown)'} (${lock}) for over ${timeoutMs} ms`,
        );
      }
      sleep(wait);
    }
    try {
      return fn();
    } finally {
      closeSync(fd);
      unlinkSync(lock);
    }
  };
}

function mtime(p: string): number {
  try {
    return statSync(p).mtimeMs;
  } catch {
    return Date.now();
  }
}

/** @example const flash = createFileByteStorage('/var/lib/ctl/flash.json') */
export function createFileByteStorage(path: string, options: FileByteStorageOptions = {}): ByteStorage {
  const locked = lockedBy(path, options.lockTimeoutMs ?? 10_000);
  // Read on every call rather than cached: another handle or process may have written since.
  const load = (): Map<string, Uint8Array> => {
    const map = new Map<string, Uint8Array>();
    if (!existsSync(path)) return map;
    const data = JSON.parse(readFileSync(path, 'utf8')) as Record<string, string>;
    for (const [k, v] of Object.entries(data)) map.set(k, new Uint8Array(Buffer.from(v, 'base64')));
    return map;
  };
  const flush = (map: Map<string, Uint8Array>) => {
    const tmp = `${path}.${process.pid}.tmp`;
    const obj: Record<string, string> = {};
    for (const [k, v] of map) obj[k] = Buffer.from(v).toString('base64');
    writeFileSync(tmp, JSON.stringify(obj));
    const fd = openSync(tmp, 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  };
  const id = (k: Uint8Array) => {
    if (!(k instanceof Uint8Array) || k.length === 0) throw new TypeError('storage key must be a non-empty Uint8Array');
    return hex(k);
  };
  return {
    get(key) {
      const v = load().get(id(key));
      return v ? v.slice() : null;
    },
    put(key, value) {
      const k = id(key);
      locked(() => {
        const map = load();
        map.set(k, value.slice());
        flush(map);
      });
    },
    compareAndSet(key, expected, value) {
      const k = id(key);
      return locked(() => {
        const map = load();
        if (!bytesEqual(map.get(k) ?? null, expected)) return false;
        map.set(k, value.slice());
        flush(map);
        return true;
      });
    },
  };
}
