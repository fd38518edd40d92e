/**
 * The agent's view of the gateway's transparency log: it keeps the last checkpoint it saw (in a
 * host-supplied store, or memory) and takes a new one only when it verifies under the pinned log
 * key and is a consistent extension of the kept one (RFC 9162 §2.1.4 proof from
 * GET /log/proof/consistency); and it checks that a receipt is included in the kept tree (RFC 9162
 * §2.1.3, GET /log/proof/inclusion). A log that rewrote history, or showed this client another
 * tree than it showed others, fails here with `log_inconsistent` / `log_proof_invalid`. A network
 * or HTTP failure rejects (no verdict either way).
 */
import { verifyCheckpoint } from '../log/api.js';
import { parseCheckpoint, verifyCheckpointConsistency, type Checkpoint } from '../log/checkpoint.js';
import { leafHash, verifyInclusion } from '../log/merkle.js';
import { parseNote } from '../log/note.js';
import { base64Decode } from '../encoding/base64url.js';
import { utf8Encode } from '../encoding/utf8.js';
import { canonicalize } from '../encoding/jcs.js';
import type { CtlErrorInfo } from '../errors.js';

type Fetch = (url: string, init?: RequestInit) => Promise<Response>;

/** Where the last good checkpoint note is kept across runs (a file, a KV); memory by default. */
export interface CheckpointStore {
  get(): string | undefined | Promise<string | undefined>;
  set(note: string): void | Promise<void>;
}

export type LogCheckResult = { valid: true; checkpoint: Checkpoint } | { valid: false; error: CtlErrorInfo };

const refusal = (message: string): LogCheckResult => ({
  valid: false,
  error: { code: 'log_proof_invalid', message } as CtlErrorInfo,
});

export function createLogFollower(o: { baseUrl: string; vkey: string; fetch: Fetch; store?: CheckpointStore }) {
  let memory: string | undefined;
  const store: CheckpointStore = o.store ?? { get: () => memory, set: (n) => void (memory = n) };
  const json = async (path: string) => {
    const res = await o.fetch(`${o.baseUrl}${path}`);
    if (!res.ok) throw new Error(`GET ${path}: HTTP ${res.status}`);
    return (await res.json()) as Record<string, unknown>;
  };
  const hashes = (v: unknown) => (Array.isArray(v) ? v.map((h) => base64Decode(String(h))) : []);
  const kept = async () => {
    const note = await store.get();
    return note === undefined ? undefined : parseCheckpoint(parseNote(note).text);
  };

  return {
    /** The kept checkpoint, or undefined before the first `refresh`. */
    checkpoint: kept,
    /** Fetches the served checkpoint; keeps it when it verifies and extends the kept one. */
    async refresh(): Promise<LogCheckResult> {
      const res = await o.fetch(`${o.baseUrl}/log/checkpoint`);
      if (!res.ok) throw new Error(`GET /log/checkpoint: HTTP ${res.status}`);
      const note = await res.text();
      const fresh = await verifyCheckpoint(note, [o.vkey]);
      if (!fresh.valid) return fresh;
      const older = await kept();
      if (older) {
        const grow = older.size > 0 && fresh.checkpoint.size > older.size;
        const proof = grow
          ? hashes((await json(`/log/proof/consistency?from=${older.size}&to=${fresh.checkpoint.size}`)).hashes)
          : [];
        const r = verifyCheckpointConsistency(older, fresh.checkpoint, proof);
        if (!r.valid) return r;
        if (fresh.checkpoint.size === older.size) return { valid: true, checkpoint: older };
      }
      await store.set(note);
      return { valid: true, checkpoint: fresh.checkpoint };
    },
    /** Checks `receipt` is in the kept tree at its log index (`X-Ctl-Log-Index`, the receipts' `logIndex`). */
    async verifyReceiptIncluded(receipt: { receiptId: string }, index?: number): Promise<LogCheckResult> {
      const cp = await kept();
      if (!cp) throw new Error('no checkpoint kept yet: call refresh() first');
      const p = await json(`/log/proof/inclusion?receiptId=${encodeURIComponent(receipt.receiptId)}&size=${cp.size}`);
      if (index !== undefined && p.index !== index) return refusal(`logged at ${p.index}, not ${index}`);
      // The leaf is the receipt this client holds, never the entry the server sends back.
      const leaf = leafHash(utf8Encode(canonicalize({ type: 'receipt', body: receipt })));
      const r = verifyInclusion(leaf, Number(p.index), cp.size, hashes(p.hashes), cp.rootHash);
      return r.valid ? { valid: true, checkpoint: cp } : r;
    },
  };
}

export type LogFollower = ReturnType<typeof createLogFollower>;
