/**
 * The transparency log as a high-water mark (rollback-guard.ts): a database restored from an
 * older backup holds an older log, while the newest checkpoint the log published (cosigned when it
 * has witnesses) is remembered outside that database, signed by the log's own key:
 *
 * - in a local file beside the audit chain's high-water file (`<file>.log-checkpoint`), rewritten
 *   each time a newer checkpoint is published (`logCheckpointFile`);
 * - by each witness, the other service, which serves the newest checkpoint of this log it cosigned
 *   at `GET <witness URL>/checkpoint?origin=` (`witnessHighWater`). A witness that cannot be
 *   reached is logged and skipped: the other service being down must not stop this one.
 *
 * A mark is compared with the database's log: its integrated tree must be at least as large, and
 * the tree recomputed from the stored tiles must have the mark's root at the mark's size (else the
 * database holds another history: a fork). Marks that do not verify under the
 * log's key are refused (the file) or ignored with a warning (a witness's answer).
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { verifyCheckpoint } from '../../src/entries/log.js';
import type { ChainPosition, ChainReader, HighWaterSink, HighWaterSource } from '../rollback-guard.js';
import type { TransparencyLog } from './log.js';
import type { WitnessConfig } from './witness.js';

const TERMS = { chain: 'transparency log', position: 'size' };

/** The log file beside the audit chain's high-water file. @example logCheckpointFileOf('/m/gw.high-water.json') */
export function logCheckpointFileOf(highWaterFile: string): string {
  return `${highWaterFile.replace(/\.json$/, '')}.log-checkpoint`;
}

/**
 * The database's log as a chain of positions: its integrated tree, and the root at any size. The
 * tree, not the newest served checkpoint: a checkpoint a witness cosigned just before a crash may
 * not be marked served yet, but its entries are in the tree.
 */
export function logChain(log: Pick<TransparencyLog, 'tree' | 'rootAt'>): ChainReader {
  return {
    async head() {
      const t = await log.tree();
      return t.size > 0 ? { seq: t.size, hash: t.root.toString('hex') } : undefined;
    },
    async hashAt(size) {
      if (size > (await log.tree()).size) return undefined;
      return (await log.rootAt(size)).toString('hex');
    },
  };
}

/** The size and root of a checkpoint note signed by the log's key; undefined when it is not one. */
async function positionOf(note: string, vkey: string): Promise<ChainPosition | undefined> {
  const r = await verifyCheckpoint(note, [vkey]);
  return r.valid ? { seq: r.checkpoint.size, hash: Buffer.from(r.checkpoint.rootHash).toString('hex') } : undefined;
}

/**
 * The newest checkpoint of `log` in a file, kept by `record` (written atomically): the note as
 * `/log/checkpoint` serves it, with its cosignatures.
 */
export function logCheckpointFile(
  log: Pick<TransparencyLog, 'checkpoint' | 'tree' | 'rootAt' | 'vkey'>,
  path: string,
): HighWaterSink {
  return {
    name: path,
    chain: logChain(log),
    terms: TERMS,
    async read() {
      let note: string;
      try {
        note = readFileSync(path, 'utf8');
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
        throw e;
      }
      const p = await positionOf(note, log.vkey);
      if (!p) throw new RangeError(`${path}: not a checkpoint signed by this log's key (${log.vkey})`);
      return p;
    },
    async record() {
      const c = await log.checkpoint();
      if (!c) return;
      mkdirSync(dirname(path), { recursive: true });
      const tmp = `${path}.${process.pid}.tmp`;
      writeFileSync(tmp, c.note, { mode: 0o600 });
      renameSync(tmp, path);
    },
  };
}

/** What a witness (the other service) holds of this log: the newest checkpoint it cosigned. */
export function witnessHighWater(
  log: Pick<TransparencyLog, 'checkpoint' | 'tree' | 'rootAt' | 'vkey' | 'origin'>,
  witness: WitnessConfig,
  o: { fetch?: typeof fetch; timeoutMs?: number; warn?: (message: string) => void } = {},
): HighWaterSource {
  const url = `${witness.url.replace(/\/+$/, '')}/checkpoint?origin=${encodeURIComponent(log.origin)}`;
  const send = o.fetch ?? fetch;
  return {
    name: `the witness at ${witness.url}`,
    chain: logChain(log),
    terms: TERMS,
    async read() {
      let note: string;
      try {
        const res = await send(url, { signal: AbortSignal.timeout(o.timeoutMs ?? 3000) });
        if (res.status === 404) return undefined;
        if (!res.ok) throw new Error(`HTTP ${res.status}`);
        note = await res.text();
      } catch (e) {
        o.warn?.(`the log's witness at ${witness.url} was not asked where the log stands: ${(e as Error).message}`);
        return undefined;
      }
      const p = await positionOf(note, log.vkey);
      if (!p) o.warn?.(`the witness at ${witness.url} answered a checkpoint this log did not sign`);
      return p;
    },
  };
}
