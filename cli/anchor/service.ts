/**
 * What `ctl anchor verify` reads from a gateway or an authority: its public log (GET
 * /log/checkpoint, /log/proof/inclusion, /log/proof/consistency; no key) and, with an admin key,
 * its anchor records (GET /admin/anchors: which transactions it sent, and whether it anchors its
 * log's checkpoints or, its log off, its audit chain's head) and its audit chain. Nothing it
 * answers is taken on trust: proofs are checked here against the pinned log key and the roots the
 * chains hold (service-kit/anchor/verify.ts).
 */
import { canonicalize } from '../../src/index.js';
import {
  hexDecode,
  leafHash,
  utf8Encode,
  verifyCheckpointConsistency,
  type Checkpoint,
} from '../../src/entries/log.js';
import type { AnchorHead, ChainJobRecord, HeadSource } from '../../service-kit/anchor/index.js';

type Fetch = typeof fetch;

/** A log of the service as GET /admin/anchors lists it. */
export interface ListedLog {
  origin: string;
  source: HeadSource;
  head: AnchorHead | null;
  checkpoint?: string;
}

export interface InclusionAnswer {
  index: number;
  size: number;
  hashes: string[];
  checkpoint?: string;
}

/** The leaf a service logs for a record it holds whole (service-kit/tlog/log.ts `encodeEntry`). */
export const entryLeaf = (type: string, body: unknown) => leafHash(utf8Encode(canonicalize({ type, body })));

const hashes = (v: unknown) => (Array.isArray(v) ? v.map((h) => Buffer.from(String(h), 'base64')) : []);
const asCheckpoint = (h: AnchorHead): Pick<Checkpoint, 'origin' | 'size' | 'rootHash'> => ({
  origin: h.origin,
  size: h.size,
  rootHash: hexDecode(h.root),
});

/** @example const s = serviceClient('https://gw.example', adminKey, fetch) */
export function serviceClient(base: string, adminKey: string | undefined, doFetch: Fetch) {
  const url = (path: string) => `${base.replace(/\/+$/, '')}${path}`;
  const get = async (path: string, admin = false) => {
    if (admin && !adminKey) throw new Error(`${path} needs --admin-key-file (an admin API key)`);
    return doFetch(url(path), admin ? { headers: { authorization: `Bearer ${adminKey}` } } : {});
  };
  const json = async <T>(path: string, admin = false): Promise<T> => {
    const res = await get(path, admin);
    if (!res.ok) throw new Error(`${url(path)}: HTTP ${res.status} ${(await res.text()).slice(0, 200)}`);
    return (await res.json()) as T;
  };
  return {
    admin: adminKey !== undefined,
    /** The anchored logs and the anchor jobs (admin). */
    anchors: () => json<{ logs: ListedLog[]; jobs: ChainJobRecord[] }>('/admin/anchors?kind=anchor&limit=1000', true),
    /** The served checkpoint note, or undefined when the service runs without its log (404). */
    async checkpoint(): Promise<string | undefined> {
      const res = await get('/log/checkpoint');
      if (res.status === 404) return undefined;
      if (!res.ok) throw new Error(`${url('/log/checkpoint')}: HTTP ${res.status}`);
      return res.text();
    },
    /** The inclusion proof of the record `param=id` (receiptId, grantId) in the served checkpoint. */
    inclusion: (param: string, id: string) =>
      json<InclusionAnswer>(`/log/proof/inclusion?${param}=${encodeURIComponent(id)}`),
    /**
     * Whether `older` and `newer` are two trees of one log: the log's consistency proof between
     * them, checked (RFC 9162 §2.1.4.2). True, or the reason it is not.
     */
    async logConsistent(older: AnchorHead, newer: AnchorHead): Promise<true | string> {
      let proof: Buffer[] = [];
      if (older.size > 0 && older.size < newer.size) {
        const res = await get(`/log/proof/consistency?from=${older.size}&to=${newer.size}`);
        if (!res.ok) return `the log gives no proof from ${older.size} to ${newer.size} (HTTP ${res.status})`;
        proof = hashes(((await res.json()) as { hashes?: unknown }).hashes);
      }
      const r = verifyCheckpointConsistency(asCheckpoint(older), asCheckpoint(newer), proof);
      return r.valid ? true : `${r.error.code}: ${r.error.message}`;
    },
    /** Whether the service's audit chain verifies and holds `h` (its entry at `size` has that hash; admin). */
    async auditHolds(h: AnchorHead): Promise<boolean> {
      const chain = await json<{ ok: boolean; count?: number }>('/admin/audit/verify', true);
      if (!chain.ok || (chain.count ?? 0) < h.size || h.size < 1) return false;
      const page = await json<{ entries: Array<{ seq: number; hash: string }> }>(
        `/admin/audit?afterSeq=${h.size - 1}&limit=1`,
        true,
      );
      return page.entries[0]?.seq === h.size && page.entries[0]?.hash === h.root;
    },
  };
}

export type ServiceClient = ReturnType<typeof serviceClient>;
