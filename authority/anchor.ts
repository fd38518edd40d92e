/**
 * Ledger anchoring of the audit log (spec §4.3 "optional on-chain anchoring … fire-and-forget,
 * does not affect issuance latency"; §6 "on-chain anchoring writes audit records
 * asynchronously"). What is anchored is the audit chain's head `{ seq, hash }`: anchoring a
 * head commits to every entry before it. A ledger adapter implements `Anchor`; the local
 * append-only file is the one shipped (and used in tests).
 */
import { appendFile, readFile, mkdir } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import type { Logger } from '../service-kit/index.js';

export interface AnchorRecord {
  seq: number;
  hash: string;
  at: string;
}

export interface Anchor {
  /** e.g. 'local'; ledger adapters name their ledger kind. */
  readonly kind: string;
  /** Writes the record; resolves to a reference (a line number, a transaction id). */
  anchor(record: AnchorRecord): Promise<string>;
}

/** An append-only JSON-lines file: each line `{ seq, hash, at, anchoredAt }`. */
export interface LocalAnchor extends Anchor {
  read(): Promise<Array<AnchorRecord & { anchoredAt: string }>>;
}

/** @example const anchor = createLocalAnchor('./data/anchor.jsonl') */
export function createLocalAnchor(path: string, now: () => number = Date.now): LocalAnchor {
  const file = resolve(path);
  let lines = -1;
  return {
    kind: 'local',
    async anchor(record) {
      await mkdir(dirname(file), { recursive: true });
      // 'a' opens O_APPEND: a write never lands anywhere but the end.
      await appendFile(file, JSON.stringify({ ...record, anchoredAt: new Date(now()).toISOString() }) + '\n', {
        flag: 'a',
      });
      lines = lines < 0 ? (await this.read()).length : lines + 1;
      return `${file}#${lines}`;
    },
    async read() {
      const text = await readFile(file, 'utf8').catch((e: { code?: string }) => {
        if (e.code === 'ENOENT') return '';
        throw e;
      });
      return text
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l));
    },
  };
}

/** Adapters by kind; ledger adapters register here (configured by `CTL_ANCHOR_<KIND>_*` variables). */
export const ANCHOR_ADAPTERS: Record<string, (env: Record<string, string | undefined>) => Anchor | undefined> = {
  local: (env) => (env['CTL_ANCHOR_LOCAL_PATH'] ? createLocalAnchor(env['CTL_ANCHOR_LOCAL_PATH']) : undefined),
};

/** The anchors the environment configures (none by default). Unknown `CTL_ANCHOR_<KIND>_` prefixes are reported. */
export function anchorsFromEnv(env: Record<string, string | undefined>, logger?: Logger): Anchor[] {
  const out: Anchor[] = [];
  for (const make of Object.values(ANCHOR_ADAPTERS)) {
    const a = make(env);
    if (a) out.push(a);
  }
  const kinds = new Set(
    Object.keys(env)
      .map((k) => /^CTL_ANCHOR_([A-Z0-9]+)_/.exec(k)?.[1]?.toLowerCase())
      .filter((k): k is string => !!k),
  );
  for (const k of kinds)
    if (!(k in ANCHOR_ADAPTERS))
      logger?.warn({ kind: k }, `no anchor adapter for CTL_ANCHOR_${k.toUpperCase()}_*: ignored`);
  return out;
}

export interface AnchorQueue {
  /** Queues a record; never throws, never waits (failures are logged). */
  submit(record: AnchorRecord): void;
  /** Resolves when everything queued so far has been written (tests, shutdown). */
  idle(): Promise<void>;
}

/** Anchors in order, one at a time, off the request path. */
export function createAnchorQueue(anchors: Anchor[], logger?: Logger): AnchorQueue {
  let tail: Promise<void> = Promise.resolve();
  return {
    submit(record) {
      if (anchors.length === 0) return;
      tail = tail.then(async () => {
        for (const a of anchors) {
          try {
            await a.anchor(record);
          } catch (e) {
            logger?.error({ err: e, kind: a.kind, seq: record.seq }, 'anchoring failed');
          }
        }
      });
    },
    idle: () => tail,
  };
}
