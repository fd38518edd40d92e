/**
 * Following a log (`ctl log monitor`): each poll verifies the served checkpoint against the pinned
 * key and checks it extends the last one kept in the state file (RFC 9162 §2.1.4 consistency
 * proof, from GET /log/proof/consistency, verified with `ctl/log`). A smaller tree, another root
 * at one size, or a proof that does not verify means the log rewrote history or showed another
 * tree: an alarm. The state file is only advanced past a checkpoint that passed.
 */
import { existsSync, readFileSync } from 'node:fs';
import {
  base64Decode,
  parseCheckpoint,
  parseNote,
  verifyCheckpoint,
  verifyCheckpointConsistency,
  type Checkpoint,
} from '../../src/entries/log.js';
import { parseStrictJson } from '../../src/index.js';
import { writeAtomic } from '../device/args.js';

export interface PollResult {
  /** The checkpoint now kept. */
  checkpoint?: Checkpoint;
  /** Set when the log cannot be trusted: the reason, for stderr. */
  alarm?: string;
  /** Set when the poll could not reach a verdict (network, HTTP error): retry. */
  unreachable?: string;
}

/** One poll of `base` against the state in `stateFile` (the last good checkpoint note). */
export async function pollLog(base: string, vkey: string, stateFile: string, f: typeof fetch): Promise<PollResult> {
  const url = base.replace(/\/+$/, '');
  let note: string;
  try {
    const res = await f(`${url}/log/checkpoint`);
    if (!res.ok) return { unreachable: `GET /log/checkpoint: HTTP ${res.status}` };
    note = await res.text();
  } catch (e) {
    return { unreachable: `GET /log/checkpoint: ${(e as Error).message}` };
  }
  const fresh = await verifyCheckpoint(note, [vkey]);
  if (!fresh.valid) return { alarm: `checkpoint refused: ${fresh.error.code}: ${fresh.error.message}` };
  const older = existsSync(stateFile) ? parseCheckpoint(parseNote(readFileSync(stateFile, 'utf8')).text) : undefined;
  const newer = fresh.checkpoint;
  if (older && older.size !== 0 && older.size < newer.size) {
    const res = await f(`${url}/log/proof/consistency?from=${older.size}&to=${newer.size}`);
    if (!res.ok) return { unreachable: `GET /log/proof/consistency: HTTP ${res.status}` };
    const body = parseStrictJson(await res.text()) as { hashes?: unknown };
    const hashes = Array.isArray(body.hashes) ? body.hashes.map((h) => base64Decode(String(h))) : [];
    const r = verifyCheckpointConsistency(older, newer, hashes);
    if (!r.valid) return { alarm: `${older.size} → ${newer.size}: ${r.error.code}: ${r.error.message}` };
  } else if (older) {
    const r = verifyCheckpointConsistency(older, newer, []);
    if (!r.valid) return { alarm: `${older.size} → ${newer.size}: ${r.error.code}: ${r.error.message}` };
  }
  if (!older || newer.size > older.size) writeAtomic(stateFile, note);
  return { checkpoint: newer };
}
