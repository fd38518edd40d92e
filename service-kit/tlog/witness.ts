/**
 * C2SP tlog-witness, both sides.
 *
 * - `createWitness`: this service cosigns (cosignature/v1) the checkpoints of the logs it is
 *   configured to witness (by their vkeys), at `POST /witness/add-checkpoint`. It verifies the
 *   log's signature and the consistency proof from the size it cosigned last, and records that
 *   size and every (size, root) it cosigned in one locked transaction (so two submissions cannot
 *   roll it back). A validly signed checkpoint of a size it cosigned before with another root is a
 *   split view: kept as evidence (both notes), told to `onSplitView`, answered 409.
 * - `witnessRound`: the log side; a new checkpoint is sent to each configured witness with a
 *   consistency proof from the size that witness cosigned last, and the cosignature lines that
 *   verify under the witness's configured vkey are kept.
 */
import type { SqlDatabase, SqlExecutor } from '../database.js';
import { checkTableName } from '../audit-log.js';
import { verifyCheckpoint, verifyConsistency } from '../../src/entries/log.js';
import { COSIGNATURE_V1, ED25519_NOTE, readVerifierKey, type NoteSigner } from './note-key.js';
import type { WitnessRound } from './log.js';

export interface SplitView {
  origin: string;
  size: number;
  /** The checkpoint cosigned before, and the other one of the same size (both validly signed by the log). */
  noteA: string;
  noteB: string;
  at: number;
}

export interface WitnessAnswer {
  status: number;
  contentType: string;
  body: string;
}

export interface Witness {
  readonly name: string;
  readonly vkey: string;
  addCheckpoint(body: string): Promise<WitnessAnswer>;
  /** What the console shows: each witnessed log's latest cosigned size, and the split views seen. */
  status(): Promise<WitnessStatus>;
  /**
   * The newest checkpoint of `origin` this witness cosigned, as the log submitted it (signed by the
   * log's key): what that log's service compares its database with at start (high-water.ts).
   */
  latest(origin: string): Promise<string | undefined>;
}

export interface WitnessStatus {
  name: string;
  vkey: string;
  logs: Array<{ origin: string; size: number; root: string | null; cosignedAt: string | null }>;
  splitViews: Array<{ origin: string; size: number; noteA: string; noteB: string; detectedAt: string }>;
}

const text = (status: number, body: string, contentType = 'text/plain; charset=utf-8'): WitnessAnswer => ({
  status,
  contentType,
  body,
});

/** The parts of an add-checkpoint body; undefined when it is not one. */
function parseSubmission(body: string): { old: number; proof: Buffer[]; note: string } | undefined {
  const m = /^old (0|[1-9][0-9]{0,15})\n/.exec(body);
  if (!m) return undefined;
  let rest = body.slice(m[0].length);
  const proof: Buffer[] = [];
  for (;;) {
    const nl = rest.indexOf('\n');
    if (nl < 0) return undefined;
    const line = rest.slice(0, nl);
    rest = rest.slice(nl + 1);
    if (line === '') break;
    const h = Buffer.from(line, 'base64');
    if (h.length !== 32 || h.toString('base64') !== line || proof.length === 63) return undefined;
    proof.push(h);
  }
  return { old: Number(m[1]), proof, note: rest };
}

export function createWitness(o: {
  db: SqlDatabase;
  prefix: string;
  /** The cosigning key (type 0x04); its name is the witness's name. */
  signer: NoteSigner;
  /** The vkeys of the logs witnessed (the key name is the log's origin). */
  logs: readonly string[];
  now?: () => number;
  /** Runs in the transaction that records a split view (the alert's outbox row). */
  record?: (q: SqlExecutor, s: SplitView) => Promise<void>;
  /** Told after that transaction committed. */
  onSplitView?: (s: SplitView) => void;
}): Witness {
  const { db, prefix: p } = o;
  checkTableName(`${p}_split_views`);
  const cosigner = o.signer.cosigner;
  if (!cosigner) throw new RangeError('witness: the key must be a cosignature/v1 key');
  const now = o.now ?? Date.now;
  // Each witnessed log by its origin, the name of its key.
  const logs = new Map<string, string>();
  for (const vkey of o.logs) logs.set(readVerifierKey(vkey, ED25519_NOTE).name, vkey.trim());

  return {
    name: o.signer.name,
    vkey: o.signer.vkey,
    async addCheckpoint(body) {
      const sub = parseSubmission(body);
      if (!sub) return text(400, 'malformed add-checkpoint request\n');
      const origin = sub.note.slice(0, sub.note.indexOf('\n'));
      const vkey = logs.get(origin);
      if (!vkey) return text(404, `unknown log origin\n`);
      const opened = await verifyCheckpoint(sub.note, [vkey], { origin });
      if (!opened.valid)
        return opened.error.code === 'malformed'
          ? text(400, 'malformed checkpoint\n')
          : text(403, 'no valid signature by a known key for this origin\n');
      const cp = opened.checkpoint;
      const root = Buffer.from(cp.rootHash);
      if (sub.old > cp.size) return text(400, 'old size is larger than the checkpoint size\n');
      const at = now();
      let split: SplitView | undefined;
      const answer = await db.tx(
        async (q) => {
          const same = await q.get<{ root: unknown; note: string }>(
            `SELECT root, note FROM ${p}_witnessed WHERE origin = ? AND size = ?`,
            [origin, cp.size],
          );
          const head = await q.get<{ size: unknown }>(`SELECT size FROM ${p}_witness_head WHERE origin = ?`, [origin]);
          const headSize = head ? Number(head.size) : 0;
          if (same && !Buffer.from(same.root as Uint8Array).equals(root)) {
            split = { origin, size: cp.size, noteA: same.note, noteB: sub.note, at };
            await q.run(`INSERT INTO ${p}_split_views (origin, size, note_a, note_b, at) VALUES (?, ?, ?, ?, ?)`, [
              origin,
              cp.size,
              same.note,
              sub.note,
              at,
            ]);
            await o.record?.(q, split);
            return text(409, `${headSize}\n`, 'text/x.tlog.size');
          }
          if (sub.old !== headSize) return text(409, `${headSize}\n`, 'text/x.tlog.size');
          if (sub.old > 0 && sub.old < cp.size) {
            const from = await q.get<{ root: unknown }>(
              `SELECT root FROM ${p}_witnessed WHERE origin = ? AND size = ?`,
              [origin, sub.old],
            );
            const oldRoot = from ? Buffer.from(from.root as Uint8Array) : undefined;
            if (!oldRoot || !verifyConsistency(sub.old, cp.size, sub.proof, oldRoot, root).valid)
              return text(422, 'the consistency proof does not verify\n');
          } else if (sub.proof.length > 0) return text(422, 'the consistency proof must be empty\n');
          await q.run(
            `INSERT INTO ${p}_witnessed (origin, size, root, note, at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
            [origin, cp.size, root, sub.note, at],
          );
          await q.run(
            `INSERT INTO ${p}_witness_head (origin, size) VALUES (?, ?)
             ON CONFLICT (origin) DO UPDATE SET size = excluded.size`,
            [origin, cp.size],
          );
          return text(200, await cosigner.cosign(cp.text, Math.floor(at / 1000)));
        },
        { lock: `${p}_witness` },
      );
      if (split) o.onSplitView?.(split);
      return answer;
    },
    async latest(origin) {
      const r = await db.get<{ note: string }>(
        `SELECT w.note FROM ${p}_witness_head h JOIN ${p}_witnessed w ON w.origin = h.origin AND w.size = h.size
         WHERE h.origin = ?`,
        [origin],
      );
      return r?.note;
    },
    async status() {
      const heads = await db.all<{ origin: string; size: unknown; root: unknown; at: unknown }>(
        `SELECT h.origin, h.size, w.root, w.at FROM ${p}_witness_head h
         LEFT JOIN ${p}_witnessed w ON w.origin = h.origin AND w.size = h.size ORDER BY h.origin`,
      );
      const splits = await db.all<{ origin: string; size: unknown; note_a: string; note_b: string; at: unknown }>(
        `SELECT origin, size, note_a, note_b, at FROM ${p}_split_views ORDER BY id DESC LIMIT 20`,
      );
      return {
        name: o.signer.name,
        vkey: o.signer.vkey,
        logs: [...logs.keys()].map((origin) => {
          const h = heads.find((x) => x.origin === origin);
          return {
            origin,
            size: h ? Number(h.size) : 0,
            root: h?.root ? Buffer.from(h.root as Uint8Array).toString('base64') : null,
            cosignedAt: h?.at != null ? new Date(Number(h.at)).toISOString() : null,
          };
        }),
        splitViews: splits.map((s) => ({
          origin: s.origin,
          size: Number(s.size),
          noteA: s.note_a,
          noteB: s.note_b,
          detectedAt: new Date(Number(s.at)).toISOString(),
        })),
      };
    },
  };
}

/** A witness this log asks for cosignatures: its add-checkpoint URL prefix and its vkey (type 0x04). */
export interface WitnessConfig {
  url: string;
  vkey: string;
}

/**
 * The log side of tlog-witness: sends the checkpoint to each witness, from the size that witness
 * cosigned last (`<prefix>_witness_state`; a 409 names it, and the request is made again from
 * there once), and keeps the cosignature lines that verify.
 */
export function witnessRound(o: {
  db: SqlDatabase;
  prefix: string;
  /** This log's vkey: a cosignature is checked on the note it signed. */
  logVkey: string;
  witnesses: readonly WitnessConfig[];
  fetch?: typeof fetch;
  timeoutMs?: number;
  onError?: (witness: string, message: string) => void;
  /** Told each cosignature kept, with the size cosigned. */
  onCosigned?: (witness: string, size: number) => void;
}): WitnessRound {
  const { db, prefix: p } = o;
  const send = o.fetch ?? fetch;
  const witnesses = o.witnesses.map((w) => {
    try {
      return {
        url: w.url.replace(/\/+$/, ''),
        vkey: w.vkey.trim(),
        name: readVerifierKey(w.vkey, COSIGNATURE_V1).name,
      };
    } catch (e) {
      throw new RangeError(`witness ${w.url}: ${(e as Error).message}`);
    }
  });
  const cosignedBy = async (note: string, w: { vkey: string }) =>
    (await verifyCheckpoint(note, [o.logVkey], { witnessKeys: [w.vkey], requireCosignatures: 1 })).valid;
  return async (note, size, proofFrom) => {
    const lines = await Promise.all(
      witnesses.map(async (w) => {
        const name = w.name;
        const known = await db.get<{ size: unknown }>(`SELECT size FROM ${p}_witness_state WHERE witness = ?`, [name]);
        let old = known ? Number(known.size) : 0;
        for (let attempt = 0; attempt < 2; attempt++) {
          if (old > size) {
            o.onError?.(name, `the witness has cosigned size ${old}, beyond this log's ${size}`);
            return '';
          }
          const proof = old > 0 && old < size ? await proofFrom(old) : [];
          const body = `old ${old}\n${proof.map((h) => `${h.toString('base64')}\n`).join('')}\n${note}`;
          let res: Response;
          try {
            res = await send(`${w.url}/add-checkpoint`, {
              method: 'POST',
              body,
              headers: { 'content-type': 'text/plain; charset=utf-8' },
              signal: AbortSignal.timeout(o.timeoutMs ?? 3000),
            });
          } catch (e) {
            o.onError?.(name, (e as Error).message);
            return '';
          }
          const answer = await res.text();
          if (res.status === 409 && /^(0|[1-9][0-9]{0,15})\n$/.test(answer) && attempt === 0) {
            old = Number(answer.trim());
            continue;
          }
          if (res.status !== 200) {
            o.onError?.(name, `add-checkpoint answered ${res.status}: ${answer.slice(0, 200).trim()}`);
            return '';
          }
          const lines = answer
            .split('\n')
            .filter((l) => l !== '')
            .map((l) => `${l}\n`);
          const good: string[] = [];
          for (const l of lines) if (await cosignedBy(`${note}${l}`, w)) good.push(l);
          if (good.length === 0) {
            o.onError?.(name, 'no cosignature in the answer verifies under the configured vkey');
            return '';
          }
          await db.run(
            `INSERT INTO ${p}_witness_state (witness, size) VALUES (?, ?)
             ON CONFLICT (witness) DO UPDATE SET size = excluded.size`,
            [name, size],
          );
          o.onCosigned?.(name, size);
          return good.join('');
        }
        return '';
      }),
    );
    return lines.join('');
  };
}
