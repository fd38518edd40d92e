/**
 * Foundry's anvil (an EVM node) for tests and `ctl start --chain`, from the devDependency `@foundry-rs/anvil`: its
 * platform package's binary, started on a free loopback port, ready once it answers JSON-RPC,
 * stopped with SIGTERM (SIGKILL after a grace). The node is real: blocks, receipts, logs,
 * `evm_snapshot`/`evm_revert`, `anvil_reorg`, `evm_increaseTime`.
 *
 * @example
 * const anvil = await startAnvil(); // { url, chainId, accounts, rpc, mine, snapshot, revert, stop }
 * try { await anvil.rpc('eth_blockNumber') } finally { await anvil.stop() }
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { createServer } from 'node:net';

/** A funded account of anvil's default mnemonic ("test test … junk"), 10 000 ETH each. */
export interface AnvilAccount {
  address: `0x${string}`;
  privateKey: `0x${string}`;
}

/** The first accounts of anvil's default mnemonic (public test keys: never use them on a real chain). */
export const ANVIL_ACCOUNTS: readonly AnvilAccount[] = [
  {
    address: '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266',
    privateKey: '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80',
  },
  {
    address: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8',
    privateKey: '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d',
  },
  {
    address: '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC',
    privateKey: '0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a',
  },
  {
    address: '0x90F79bf6EB2c4f870365E785982E1f101E93b906',
    privateKey: '0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6',
  },
];

export interface AnvilOptions {
  /** Default 31337. */
  chainId?: number;
  /** Seconds between blocks (interval mining); default: a block per transaction (automine). */
  blockTime?: number;
  /** No mining until `mine()` (transactions wait in the pool). */
  noMining?: boolean;
  /** More command-line arguments. */
  args?: string[];
  /** How long to wait for JSON-RPC (default 20 000 ms). */
  timeoutMs?: number;
}

export interface Anvil {
  /** `http://127.0.0.1:<port>` */
  url: string;
  port: number;
  chainId: number;
  pid: number;
  accounts: readonly AnvilAccount[];
  /** One JSON-RPC call; throws the node's error message. */
  rpc<T = unknown>(method: string, params?: unknown[]): Promise<T>;
  /** Mines `blocks` blocks (default 1). */
  mine(blocks?: number): Promise<void>;
  /** `evm_snapshot`: an id to `revert` to. */
  snapshot(): Promise<string>;
  revert(id: string): Promise<boolean>;
  /** Stops the node (SIGTERM, then SIGKILL after 5 s); resolves once it exited. */
  stop(): Promise<void>;
}

/** The anvil binary of this platform's package, or undefined when the platform has none. */
export function anvilBinary(): string | undefined {
  const arch = process.arch === 'x64' ? 'amd64' : process.arch;
  const pkg = `@foundry-rs/anvil-${process.platform}-${arch}`;
  try {
    const dir = dirname(createRequire(import.meta.url).resolve(`${pkg}/package.json`));
    const bin = join(dir, 'bin', process.platform === 'win32' ? 'anvil.exe' : 'anvil');
    return existsSync(bin) ? bin : undefined;
  } catch {
    return undefined;
  }
}

async function call<T>(url: string, method: string, params: unknown[] = []): Promise<T> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    signal: AbortSignal.timeout(10_000),
  });
  const body = (await res.json()) as { result?: T; error?: { message: string } };
  if (body.error) throw new Error(`${method}: ${body.error.message}`);
  return body.result as T;
}

/** A loopback port nothing listens on: bound, then closed. */
async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

const running = new Set<ChildProcess>();
// A test process that ends without stopping its node (a failed assertion, an uncaught error) takes it along.
process.once('exit', () => {
  for (const c of running) c.kill('SIGKILL');
});

async function startOnce(bin: string, options: AnvilOptions, port: number): Promise<Anvil> {
  const chainId = options.chainId ?? 31337;
  const args = ['--host', '127.0.0.1', '--port', String(port), '--chain-id', String(chainId), '--accounts', '4'];
  if (options.blockTime !== undefined) args.push('--block-time', String(options.blockTime));
  if (options.noMining) args.push('--no-mining');
  args.push(...(options.args ?? []));
  const child = spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  running.add(child);
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-2000)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => (running.delete(child), resolve())));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + (options.timeoutMs ?? 20_000);
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`anvil exited before answering (${child.exitCode ?? child.signalCode}): ${stderr.trim()}`);
    try {
      const id = await call<string>(url, 'eth_chainId');
      if (Number(id) !== chainId) throw new Error(`anvil at ${url} answers chain ${Number(id)}, not ${chainId}`);
      break;
    } catch (e) {
      if (/answers chain/.test((e as Error).message)) throw e;
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`anvil did not answer JSON-RPC at ${url} within the timeout: ${stderr.trim()}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  const accounts = await call<string[]>(url, 'eth_accounts');
  if (accounts[0]?.toLowerCase() !== ANVIL_ACCOUNTS[0]!.address.toLowerCase())
    throw new Error(`anvil's first account is ${accounts[0]}, not the default mnemonic's`);
  return {
    url,
    port,
    chainId,
    pid: child.pid!,
    accounts: ANVIL_ACCOUNTS,
    rpc: (method, params) => call(url, method, params),
    async mine(blocks = 1) {
      await call(url, 'anvil_mine', [`0x${blocks.toString(16)}`]);
    },
    snapshot: () => call<string>(url, 'evm_snapshot'),
    revert: (id) => call<boolean>(url, 'evm_revert', [id]),
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const t = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(t);
      }
    },
  };
}

/** Starts anvil on a free port (another port if a race took it). Throws when the platform has no binary. */
export async function startAnvil(options: AnvilOptions = {}): Promise<Anvil> {
  const bin = anvilBinary();
  if (!bin) throw new Error(`no anvil binary for ${process.platform}-${process.arch} (npm install @foundry-rs/anvil)`);
  let last: unknown;
  for (let i = 0; i < 3; i++) {
    try {
      return await startOnce(bin, options, await freePort());
    } catch (e) {
      last = e;
      if (!/exited before answering/.test((e as Error).message)) throw e;
    }
  }
  throw last;
}
