/**
 * The outside audit of a service's transparency log (`ctl log audit`): from its public endpoints
 * only, with the log's verifier key pinned by the caller, it checks the signed checkpoint,
 * fetches every tile and entry bundle (C2SP tlog-tiles), recomputes every hash of every tile
 * level and the root (RFC 9162 §2.1) with the SDK's `ctl/log`, verifies each receipt's signature,
 * and balances each session's books: its receipts against the ceiling and windows its
 * `session.created` entry logged (PROTOCOL.md §13), raised only by `session.continued`.
 * Every discrepancy is a line in `problems`; none means the log and the books hold.
 */
import {
  leafHash,
  rootFromLeafHashes,
  tilesOfTree,
  tilePath,
  parseEntryBundle,
  verifyCheckpoint,
  base64Encode,
  utf8Decode,
  TILE_WIDTH,
  type Checkpoint,
  type Hash,
  type TileRef,
} from '../../src/entries/log.js';
import { canonicalize, parseStrictJson, verifyReceipt, windowAt, type WindowPeriod } from '../../src/index.js';
import type { Jwks, Receipt } from '../../src/index.js';

export interface AuditOptions {
  /** The log's note verifier key, pinned: the server's /log/vkey must say the same. */
  vkey: string;
  fetch: typeof fetch;
  /** The gateway's receipt keys; default its /.well-known/ctl-keys.json. */
  jwks?: Jwks;
  /** Tiles fetched at once. */
  concurrency?: number;
}

export interface AuditReport {
  checkpoint?: Checkpoint;
  entries: number;
  receipts: number;
  sessions: number;
  /** Receipts logged by digest only (too large for an entry): their signatures are not checked. */
  digests: number;
  problems: string[];
}

interface Books {
  currency: string;
  ceiling: bigint;
  spent: bigint;
  windows: Array<{ every: WindowPeriod; max: bigint; maxPayments?: bigint; start: number }>;
  /** Per window period and start: amount and payments. */
  spans: Map<string, { amount: bigint; payments: bigint }>;
}

const SUBTREE = TILE_WIDTH;

export async function auditLog(base: string, o: AuditOptions): Promise<AuditReport> {
  const report: AuditReport = { entries: 0, receipts: 0, sessions: 0, digests: 0, problems: [] };
  const problem = (m: string) => report.problems.push(m);
  const url = base.replace(/\/+$/, '');
  const get = async (path: string): Promise<Uint8Array> => {
    const res = await o.fetch(`${url}${path}`);
    if (!res.ok) throw new AuditError(`GET ${path}: HTTP ${res.status}`);
    return new Uint8Array(await res.arrayBuffer());
  };

  // Byte for byte (one final newline aside): any other edit of the served key is a discrepancy.
  const served = utf8Decode(await get('/log/vkey')).replace(/\n$/, '');
  if (served !== o.vkey.trim()) problem(`/log/vkey serves ${served}, not the pinned key`);
  const cp = await verifyCheckpoint(await get('/log/checkpoint'), [o.vkey.trim()]);
  if (!cp.valid) {
    problem(`checkpoint: ${cp.error.code}: ${cp.error.message}`);
    return report;
  }
  report.checkpoint = cp.checkpoint;
  const size = cp.checkpoint.size;

  const tiles = tilesOfTree(size);
  const bytes = await fetchAll(tiles, (t) => get(`/log/${tilePath(t)}`), o.concurrency ?? 8);
  const entries: Uint8Array[] = [];
  const levels: Uint8Array[][] = [];
  tiles.forEach((t, i) => {
    const b = bytes[i]!;
    if (t.level === 'entries') {
      let list: Uint8Array[] = [];
      try {
        list = parseEntryBundle(b);
      } catch (e) {
        problem(`${tilePath(t)}: ${(e as Error).message}`);
      }
      if (list.length !== t.width) problem(`${tilePath(t)}: ${list.length} entries, expected ${t.width}`);
      entries.push(...list.slice(0, t.width));
      while (entries.length < t.index * SUBTREE + t.width) entries.push(new Uint8Array(0));
    } else {
      if (b.length !== t.width * 32) problem(`${tilePath(t)}: ${b.length} bytes, expected ${t.width * 32}`);
      const hashes = (levels[t.level] ??= []);
      for (let j = 0; j < t.width; j++) hashes[t.index * SUBTREE + j] = b.slice(j * 32, j * 32 + 32);
    }
  });
  report.entries = entries.length;
  checkHashes(entries, levels, size, cp.checkpoint.rootHash, problem);
  await balance(
    entries,
    o.jwks ?? (parseStrictJson(utf8Decode(await get('/.well-known/ctl-keys.json'))) as Jwks),
    report,
  );
  return report;
}

export class AuditError extends Error {}

async function fetchAll<T>(items: T[], fetchOne: (t: T) => Promise<Uint8Array>, n: number): Promise<Uint8Array[]> {
  const out: Uint8Array[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fetchOne(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, worker));
  return out;
}

const same = (a: Uint8Array | undefined, b: Uint8Array) =>
  !!a && a.length === b.length && a.every((x, i) => x === b[i]);

/**
 * Every served hash recomputed: level 0 from the entries, each level above from the 256 hashes
 * below it (a tile hash is the root of a perfect subtree), and the root from the leaves.
 */
function checkHashes(
  entries: Uint8Array[],
  levels: Uint8Array[][],
  size: number,
  root: Hash,
  problem: (m: string) => void,
): void {
  const leaves = entries.map((e) => leafHash(e));
  let below: Hash[] = leaves;
  for (let level = 0; level < levels.length || (level === 0 && size > 0); level++) {
    const served = levels[level] ?? [];
    const want =
      level === 0
        ? below
        : Array.from({ length: Math.floor(below.length / SUBTREE) }, (_, j) =>
            rootFromLeafHashes(below.slice(j * SUBTREE, (j + 1) * SUBTREE)),
          );
    let bad = 0;
    want.forEach((h, j) => {
      if (!same(served[j], h) && bad++ < 3) problem(`tile level ${level}: hash ${j} is not what its subtree gives`);
    });
    if (served.length !== want.length) problem(`tile level ${level}: ${served.length} hashes, expected ${want.length}`);
    below = want;
  }
  const computed = rootFromLeafHashes(leaves);
  if (!same(computed, root))
    problem(`root: the ${size} entries give ${base64Encode(computed)}, the checkpoint says ${base64Encode(root)}`);
}

/** Each entry read, each receipt verified, and each session's books summed against its bounds. */
async function balance(entries: Uint8Array[], jwks: Jwks, report: AuditReport): Promise<void> {
  const problem = (m: string) => report.problems.push(m);
  const books = new Map<string, Books>();
  const seen = new Set<string>();
  for (const [i, bytes] of entries.entries()) {
    let entry: { type: string; body: Record<string, unknown> };
    try {
      const text = utf8Decode(bytes);
      entry = parseStrictJson(text) as typeof entry;
      if (canonicalize(entry) !== text) throw new Error('not in canonical form (JCS)');
      if (typeof entry?.type !== 'string' || typeof entry.body !== 'object' || entry.body === null)
        throw new Error('not { type, body }');
    } catch (e) {
      problem(`entry ${i}: ${(e as Error).message}`);
      continue;
    }
    const b = entry.body;
    if (entry.type === 'session.created') {
      if (books.has(String(b.sessionId))) problem(`entry ${i}: session ${b.sessionId} created twice`);
      else books.set(String(b.sessionId), openBooks(b));
    } else if (entry.type === 'session.continued') {
      const s = books.get(String(b.sessionId));
      if (!s) problem(`entry ${i}: session ${b.sessionId} continued before it was created`);
      else if (typeof b.ceilingMinor === 'string') s.ceiling = BigInt(b.ceilingMinor);
    } else if (entry.type === 'receipt') {
      report.receipts++;
      const v = await verifyReceipt(b, { jwks });
      if (!v.valid) {
        problem(`entry ${i}: receipt ${b.receiptId}: ${v.error.code}: ${v.error.message}`);
        continue;
      }
      if (seen.has(v.receipt.receiptId)) problem(`entry ${i}: receipt ${v.receipt.receiptId} logged twice`);
      seen.add(v.receipt.receiptId);
      const s = books.get(v.receipt.sessionId);
      if (!s) problem(`entry ${i}: receipt ${v.receipt.receiptId} of a session not created before it`);
      else charge(s, v.receipt, i, problem);
    } else if (entry.type === 'receipt.digest') {
      report.digests++;
    }
  }
  report.sessions = books.size;
}

function openBooks(b: Record<string, unknown>): Books {
  const budget = b.budget as { amount: string; currency: string };
  const start = typeof b.windowsStart === 'string' ? Date.parse(b.windowsStart) : Date.parse(String(b.at));
  const windows = (
    (b.windows ?? []) as Array<{ every: WindowPeriod; maxAmountMinor: string; maxPayments?: number }>
  ).map((w) => ({
    every: w.every,
    max: BigInt(w.maxAmountMinor),
    ...(w.maxPayments !== undefined ? { maxPayments: BigInt(w.maxPayments) } : {}),
    start,
  }));
  return { currency: budget.currency, ceiling: BigInt(budget.amount), spent: 0n, windows, spans: new Map() };
}

/** A receipt's amount on its session's books: the ceiling and every window (PROTOCOL.md §13). */
function charge(s: Books, r: Receipt, i: number, problem: (m: string) => void): void {
  const amount = BigInt(r.amount.amountMinor);
  if (r.amount.currency !== s.currency)
    problem(`entry ${i}: receipt ${r.receiptId} in ${r.amount.currency}, its session in ${s.currency}`);
  s.spent += amount;
  if (s.spent > s.ceiling)
    problem(
      `entry ${i}: session ${r.sessionId} paid ${s.spent} past its ceiling ${s.ceiling} (receipt ${r.receiptId})`,
    );
  const at = Date.parse(r.paidAt);
  for (const w of s.windows) {
    const span = windowAt(w.every, w.start, at);
    const key = `${w.every}@${span.startsAt}`;
    const sum = s.spans.get(key) ?? { amount: 0n, payments: 0n };
    sum.amount += amount;
    sum.payments += 1n;
    s.spans.set(key, sum);
    const when = new Date(span.startsAt).toISOString();
    if (sum.amount > w.max)
      problem(
        `entry ${i}: session ${r.sessionId} paid ${sum.amount} in its ${w.every} window of ${when}, above ${w.max}`,
      );
    if (w.maxPayments !== undefined && sum.payments > w.maxPayments)
      problem(`entry ${i}: session ${r.sessionId} made ${sum.payments} payments in its ${w.every} window of ${when}`);
  }
}

export type { TileRef };
