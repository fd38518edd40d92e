/**
 * What the chain tests share: a database with the outbox and an audit chain on it, an EVM
 * ledger signing with one of anvil's accounts, a fetch that can be cut (a node that is down),
 * and a clock the test moves.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { privateKeyToAccount } from 'viem/accounts';
import { openDatabase, migrate, auditLogMigration, createAuditLog, type SqlDatabase } from '../../service-kit/index.js';
import { chainOutboxMigration, createEvmLedger, type Ledger } from '../../service-kit/anchor/index.js';
import type { EvmSigner } from '../../service-kit/chain/evm-signer.js';
import { sign } from 'viem/accounts';
import type { Anvil, AnvilAccount } from '../helpers/anvil.js';
import { PG_URL, dropSchema, freshSchema } from '../service-kit/pg-fixture.js';

export const ORIGIN = 'test.example/ctl-authority-audit';

/** A database with the outbox and an audit chain: SQLite in a temporary directory, or a fresh PostgreSQL schema. */
export async function chainDb(kind: 'sqlite' | 'postgres' = 'sqlite') {
  let db: SqlDatabase;
  let cleanup: () => Promise<void>;
  if (kind === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'ctl-chain-'));
    db = await openDatabase(`sqlite:${join(dir, 'db.sqlite')}`);
    cleanup = async () => rmSync(dir, { recursive: true, force: true });
  } else {
    const schema = freshSchema();
    db = await openDatabase(PG_URL, { schema });
    cleanup = () => dropSchema(schema);
  }
  await migrate(db, [auditLogMigration('audit_log'), chainOutboxMigration('chain_outbox')]);
  const audit = createAuditLog(db, 'audit_log');
  return {
    db,
    audit,
    /** Appends `n` entries; resolves to the new head. */
    async grow(n = 1) {
      let last;
      for (let i = 0; i < n; i++) last = await audit.append({ actor: 'test', action: 'grant.issue', subject: `g${i}` });
      return { origin: ORIGIN, size: last!.seq, root: last!.hash };
    },
    async close() {
      await db.close();
      await cleanup();
    },
  };
}

/** A signer over a test account's private key (the key file signer without the file). */
export function accountSigner(a: AnvilAccount): EvmSigner {
  return {
    address: privateKeyToAccount(a.privateKey).address,
    description: 'test account',
    custody: 'file',
    async signDigest(digest) {
      const s = await sign({ hash: digest, privateKey: a.privateKey });
      return { r: s.r, s: s.s, yParity: s.yParity === 1 ? 1 : 0 };
    },
    close: async () => {},
  };
}

/** A fetch that fails like an unreachable node while `down` is set, or drops the calls `drop` names. */
export function cuttableFetch() {
  const state = { down: false, drop: new Set<string>(), calls: 0 };
  const f = (async (url: string | URL | Request, init?: RequestInit) => {
    state.calls++;
    if (state.down) throw new TypeError('fetch failed (the test cut the node)');
    const body = typeof init?.body === 'string' ? init.body : '';
    for (const m of state.drop)
      if (body.includes(`"${m}"`)) {
        state.drop.delete(m);
        throw new TypeError(`fetch failed (the test dropped ${m})`);
      }
    return fetch(url, init);
  }) as typeof fetch;
  return { fetch: f, state };
}

export function evmLedger(
  anvil: Anvil,
  o: {
    anchorContract?: `0x${string}`;
    revocationContract?: `0x${string}`;
    signer?: AnvilAccount;
    confirmations?: number;
    fetch?: typeof fetch;
  },
): Promise<Ledger> {
  return createEvmLedger({
    rpcUrl: anvil.url,
    chainId: anvil.chainId,
    signer: accountSigner(o.signer ?? anvil.accounts[1]!),
    anchorContract: o.anchorContract,
    revocationContract: o.revocationContract,
    confirmations: o.confirmations ?? 1,
    fetch: o.fetch,
  });
}

/** A clock the test moves. */
export function testClock(start = Date.parse('2026-06-01T00:00:00Z')) {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms), set: (ms: number) => (t = ms) };
}
