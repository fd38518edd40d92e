/**
 * A ByteStorage in one file, standing in for flash in the reference host and the examples.
 * Every write goes to a temporary file that is renamed over the old one, so a crash leaves the
 * old or the new content (the atomicity the ABI asks of compare-and-set). One process owns the
 * file at a time (as one firmware owns its flash): the read-compare-write of a CAS is atomic
 * within that process (synchronous fs calls), not across processes.
 */
import { existsSync, readFileSync, renameSync, writeFileSync, fsyncSync, openSync, closeSync } from 'node:fs';
import type { ByteStorage } from '../abi.js';
import { bytesEqual } from '../abi.js';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** @example const flash = createFileByteStorage('/var/lib/ctl/flash.json') */
export function createFileByteStorage(path: string): ByteStorage {
  // Read on every call rather than cached: two handles on one file in one process (a test's
  // "reboot" while the old object lingers) then still compare against what is really stored.
  const load = (): Map<string, Uint8Array> => {
    const map = new Map<string, Uint8Array>();
    if (!existsSync(path)) return map;
    const data = JSON.parse(readFileSync(path, 'utf8')) as Record<string, string>;
    for (const [k, v] of Object.entries(data)) map.set(k, new Uint8Array(Buffer.from(v, 'base64')));
    return map;
  };
  const flush = (map: Map<string, Uint8Array>) => {
    const tmp = `${path}.tmp`;
    const obj: Record<string, string> = {};
    for (const [k, v] of map) obj[k] = Buffer.from(v).toString('base64');
    writeFileSync(tmp, JSON.stringify(obj));
    const fd = openSync(tmp, 'r');
    try { fsyncSync(fd); } finally { closeSync(fd); }
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
      const map = load();
      map.set(id(key), value.slice());
      flush(map);
    },
    compareAndSet(key, expected, value) {
      const k = id(key);
      const map = load();
      if (!bytesEqual(map.get(k) ?? null, expected)) return false;
      map.set(k, value.slice());
      flush(map);
      return true;
    },
  };
}
