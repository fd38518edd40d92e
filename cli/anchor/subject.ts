/**
 * What `ctl anchor verify` checks on the chains, and how it got there: a checkpoint (a file, or
 * the one the service serves), verified under the pinned log key; a receipt or a grant walked to
 * one (receipt → its inclusion proof → the checkpoint it is proven in); a head given by hand; or,
 * for a service whose log is off, its audit chain's head. Each step's verdict is a line of the
 * report; a step that fails is a problem (exit 1), the chains are still checked.
 */
import { readText, UsageError } from '../device/args.js';
import { parseStrictJson } from '../../src/index.js';
import { base64Decode, parseVerifierKey, verifyCheckpoint, verifyInclusion } from '../../src/entries/log.js';
import { checkAnchorHead, headOfCheckpoint, type AnchorHead, type HeadSource } from '../../service-kit/anchor/index.js';
import { entryLeaf, type ListedLog, type ServiceClient } from './service.js';

export interface Subject {
  head: AnchorHead;
  source: HeadSource;
  /** Entries an anchor must cover (a record at index i: i + 1). */
  minSize?: number;
  /** The walk, one line a step. */
  steps: string[];
  /** What failed on the way (the head is still checked on the chains). */
  problems: string[];
}

export interface SubjectOptions {
  checkpoint?: string;
  receipt?: string;
  grant?: string;
  origin?: string;
  size?: string;
  root?: string;
  vkey?: string;
  service?: ServiceClient;
  listed?: { logs: ListedLog[] };
}

/** The note verifier key given as text or @FILE: pinned, never taken from the service. */
export function pinnedVkey(v: string): string {
  const key = (v.startsWith('@') ? readText(v.slice(1), '--vkey file') : v).trim();
  try {
    parseVerifierKey(key);
  } catch (e) {
    throw new UsageError(`--vkey: not a note verifier key: ${(e as Error).message}`);
  }
  return key;
}

/** Refuses to go on without the log's pinned key (before anything is fetched). */
function needVkey(vkey: string | undefined, what: string): asserts vkey is string {
  if (!vkey) throw new UsageError(`${what}: give the log's verifier key (--vkey VKEY or @FILE; GET /log/vkey)`);
}

/** A checkpoint note checked under the pinned key: its head, and a step or a problem. */
async function signedHead(note: string, vkey: string | undefined, what: string, steps: string[], problems: string[]) {
  needVkey(vkey, what);
  const r = await verifyCheckpoint(note, [vkey]);
  if (r.valid) {
    steps.push(`${what}: signed by ${r.signedBy.join(', ')}`);
    return {
      origin: r.checkpoint.origin,
      size: r.checkpoint.size,
      root: Buffer.from(r.checkpoint.rootHash).toString('hex'),
    };
  }
  problems.push(`${what}: REFUSED: ${r.error.code}: ${r.error.message}`);
  return headOfCheckpoint(note);
}

/** A receipt or a grant → its inclusion proof → the checkpoint it is in. */
async function walkRecord(o: SubjectOptions, kind: 'receipt' | 'grant', file: string): Promise<Subject> {
  if (!o.service) throw new UsageError(`--${kind} needs --service (the log that holds it)`);
  needVkey(o.vkey, `--${kind}`);
  const record = parseStrictJson(readText(file, `the ${kind}`)) as Record<string, unknown>;
  const param = kind === 'receipt' ? 'receiptId' : 'grantId';
  const id = record[param];
  if (typeof id !== 'string') throw new UsageError(`--${kind}: ${file} has no ${param}`);
  const steps: string[] = [];
  const problems: string[] = [];
  const p = await o.service.inclusion(param, id);
  if (!p.checkpoint) throw new Error(`the log sent no checkpoint with the inclusion proof of ${id}`);
  const head = await signedHead(p.checkpoint, o.vkey, 'checkpoint', steps, problems);
  // The leaf is the record this verifier holds, never the entry the service sends back.
  const r = verifyInclusion(
    entryLeaf(kind, record),
    p.index,
    head.size,
    p.hashes.map(base64Decode),
    Buffer.from(head.root, 'hex'),
  );
  if (r.valid)
    steps.unshift(`${kind} ${id}: entry ${p.index} of ${head.origin}, included in the tree of size ${head.size}`);
  else problems.push(`${kind} ${id}: REFUSED: not included at ${p.index}: ${r.error.message}`);
  return { head, source: 'checkpoint', minSize: p.index + 1, steps, problems };
}

/** The head a raw --origin/--size/--root names. */
function givenHead(o: SubjectOptions): AnchorHead {
  const head = { origin: o.origin ?? '', size: Number(o.size), root: (o.root ?? '').toLowerCase() };
  try {
    return checkAnchorHead(head);
  } catch (e) {
    throw new UsageError(`--origin/--size/--root: ${(e as Error).message}`);
  }
}

/**
 * What is checked, from the options (one of --receipt, --grant, --checkpoint, --origin/--size/--root,
 * else the service's current checkpoint, else its audit head).
 */
export async function subjectToCheck(o: SubjectOptions): Promise<Subject> {
  const steps: string[] = [];
  const problems: string[] = [];
  if (o.receipt) return walkRecord(o, 'receipt', o.receipt);
  if (o.grant) return walkRecord(o, 'grant', o.grant);
  if (o.checkpoint) {
    const head = await signedHead(readText(o.checkpoint, 'the checkpoint'), o.vkey, 'checkpoint', steps, problems);
    return { head, source: 'checkpoint', steps, problems };
  }
  if (o.size !== undefined || o.root !== undefined) {
    const head = givenHead(o);
    const listed = o.listed?.logs.find((l) => l.origin === head.origin);
    return { head, source: listed?.source ?? 'checkpoint', steps, problems };
  }
  if (!o.service) throw new UsageError('give --checkpoint, --receipt, --origin/--size/--root, or --service');
  const served = await o.service.checkpoint();
  if (served !== undefined) {
    const head = await signedHead(served, o.vkey, 'the served checkpoint', steps, problems);
    return { head, source: 'checkpoint', steps, problems };
  }
  // No log: the service anchors its audit chain's head (its records say so).
  if (!o.listed) throw new UsageError('the service serves no log: its audit head needs --admin-key-file');
  const audit = o.listed.logs.find((l) => l.source === 'audit-head' && (!o.origin || l.origin === o.origin));
  if (!audit?.head) throw new UsageError('the service has no head to check');
  steps.push(`the service's log is off: its audit chain's head is anchored`);
  return { head: audit.head, source: 'audit-head', steps, problems };
}
