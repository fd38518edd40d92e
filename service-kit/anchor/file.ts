/**
 * The development ledger: an append-only JSON-lines file (`CTL_ANCHOR_LOCAL_PATH`), one line
 * `{ origin, size, root, at }` per anchor. It proves nothing to anyone but the machine's owner;
 * it exercises the outbox without a node. A "transaction" is its line's SHA-256; a line is
 * final once written (one confirmation).
 */
import { createHash } from 'node:crypto';
import { appendFile, mkdir, readFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import type { AnchorHead } from './head.js';
import type { Ledger, TxStatus } from './ledger.js';

export interface FileLedger extends Ledger {
  read(): Promise<Array<AnchorHead & { at: string }>>;
}

/** @example const file = createFileLedger('./data/anchors.jsonl') */
export function createFileLedger(path: string, now: () => number = Date.now): FileLedger {
  const file = resolve(path);
  const lines = async () => {
    const text = await readFile(file, 'utf8').catch((e: { code?: string }) => {
      if (e.code === 'ENOENT') return '';
      throw e;
    });
    return text.split('\n').filter(Boolean);
  };
  const id = (line: string) => createHash('sha256').update(line).digest('hex');
  return {
    name: 'file',
    confirmations: 1,
    kinds: ['anchor'],
    async prepare(job) {
      if (job.kind !== 'anchor') throw new Error('the file ledger carries anchors only');
      const { origin, size, root } = job.head;
      const raw = JSON.stringify({ origin, size, root, at: new Date(now()).toISOString() });
      return { txid: id(raw), raw };
    },
    async broadcast(tx) {
      if ((await lines()).includes(tx.raw)) return;
      await mkdir(dirname(file), { recursive: true });
      // 'a' opens O_APPEND: a write never lands anywhere but the end.
      await appendFile(file, `${tx.raw}\n`, { flag: 'a' });
    },
    async status(tx): Promise<TxStatus> {
      const at = (await lines()).indexOf(tx.raw);
      return at < 0
        ? { state: 'unknown' }
        : { state: 'mined', blockNumber: at + 1, blockHash: tx.txid, confirmations: 1 };
    },
    read: async () => (await lines()).map((l) => JSON.parse(l)),
  };
}
