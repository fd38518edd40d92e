/**
 * Debian's litecoind (Litecoin Core 0.21: the Bitcoin Core JSON-RPC) in regtest mode for tests:
 * a temporary data directory, free loopback ports, `-txindex` (a verifier reads any transaction),
 * a wallet `anchor` with one funded bech32 address (101 blocks mined to it: one spendable coinbase).
 * A test skips with `LITECOIND_MISSING` when the binary is absent (.ci/run installs it).
 *
 * @example
 * const ltc = await startLitecoind(); // { url, user, password, address, rpc, mine, stop }
 * try { await ltc.rpc('getblockcount') } finally { await ltc.stop() }
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './ports.js';

export const LITECOIND_MISSING = 'skipped: litecoind is not installed (Debian package litecoind)';

/** The litecoind binary on PATH, or undefined. */
export function litecoindPath(): string | undefined {
  try {
    return execFileSync('sh', ['-c', 'command -v litecoind'], { encoding: 'utf8' }).trim() || undefined;
  } catch {
    return undefined;
  }
}

export interface Litecoind {
  /** `http://127.0.0.1:<rpcport>` (the node; a wallet is at `/wallet/<name>`). */
  url: string;
  user: string;
  password: string;
  /** The wallet's funded address (bech32, `rltc1…`). */
  address: string;
  wallet: string;
  datadir: string;
  /** One JSON-RPC call, at the node or at `wallet`'s path; throws the node's error message. */
  rpc<T = unknown>(method: string, params?: unknown[], wallet?: string): Promise<T>;
  /** Mines `blocks` blocks to `address` (default the funded one); resolves to their hashes. */
  mine(blocks?: number, address?: string): Promise<string[]>;
  stop(): Promise<void>;
}

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of running) c.kill('SIGKILL');
});

export async function startLitecoind(options: { timeoutMs?: number } = {}): Promise<Litecoind> {
  const bin = litecoindPath();
  if (!bin) throw new Error(LITECOIND_MISSING);
  const datadir = mkdtempSync(join(tmpdir(), 'ctl-litecoind-'));
  const [rpcport, port] = [await freePort(), await freePort()];
  const user = 'ctl';
  const password = 'regtest-only';
  const child = spawn(
    bin,
    [
      '-regtest',
      `-datadir=${datadir}`,
      `-rpcport=${rpcport}`,
      `-port=${port}`,
      '-rpcbind=127.0.0.1',
      '-rpcallowip=127.0.0.1',
      `-rpcuser=${user}`,
      `-rpcpassword=${password}`,
      '-listen=0',
      '-server=1',
      '-txindex=1',
      '-fallbackfee=0.0001',
      '-printtoconsole=0',
      // A small key pool: making the default 1000 keys takes seconds on a busy machine.
      '-keypool=8',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  running.add(child);
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-2000)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => (running.delete(child), resolve())));
  const url = `http://127.0.0.1:${rpcport}`;
  const auth = `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
  const rpc = async <T>(method: string, params: unknown[] = [], wallet?: string): Promise<T> => {
    const res = await fetch(wallet ? `${url}/wallet/${encodeURIComponent(wallet)}` : url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: auth },
      body: JSON.stringify({ jsonrpc: '1.0', id: 1, method, params }),
      signal: AbortSignal.timeout(15_000),
    });
    const body = (await res.json()) as { result?: T; error?: { code: number; message: string } | null };
    if (body.error) throw new Error(`${method}: ${body.error.message} (${body.error.code})`);
    return body.result as T;
  };
  const deadline = Date.now() + (options.timeoutMs ?? 30_000);
  for (;;) {
    if (child.exitCode !== null) {
      rmSync(datadir, { recursive: true, force: true });
      throw new Error(`litecoind exited (${child.exitCode}): ${stderr.trim()}`);
    }
    try {
      await rpc('getblockchaininfo');
      break;
    } catch (e) {
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`litecoind did not answer at ${url}: ${(e as Error).message} ${stderr.trim()}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  const wallet = 'anchor';
  await rpc('createwallet', [wallet]);
  const address = await rpc<string>('getnewaddress', ['', 'bech32'], wallet);
  const mine = (blocks = 1, to = address) => rpc<string[]>('generatetoaddress', [blocks, to]);
  await mine(101);
  return {
    url,
    user,
    password,
    address,
    wallet,
    datadir,
    rpc,
    mine,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        // The data directory is thrown away: no clean shutdown (it flushes for seconds).
        child.kill('SIGKILL');
        await exited;
      }
      rmSync(datadir, { recursive: true, force: true });
    },
  };
}
