/**
 * `ctl anchor verify` checks that a log's head (a C2SP checkpoint, or the service's current audit
 * head) is anchored on every chain the CTL_ANCHOR_* variables configure, trusting only the chain
 * and the pinned contract and address (service-kit/anchor/verify.ts). `ctl anchor deploy` deploys
 * the anchoring contract or the revocation-token contract with the configured signer.
 */
import { guard, one, parseArgs, readText, UsageError } from './device/args.js';
import { ConfigError } from '../service-kit/config.js';
import {
  anchorSettingsFromEnv,
  checkAnchorHead,
  headOfCheckpoint,
  openEvmAnchorSigner,
  verifyAnchors,
  type AnchorHead,
  type AnchorRef,
  type ChainJobRecord,
} from '../service-kit/anchor/index.js';

const USAGE = `usage: ctl anchor verify [--service URL --admin-key-file FILE]
                         [--checkpoint FILE | --origin O --size N --root HEX]
                         [--tx evm:HASH|btc:TXID ...] [--confirmations N] [--json]
       ctl anchor deploy anchor|revocations [--anchorer ADDRESS | --authority ADDRESS] [--burn-grace SECONDS]

  verify   checks the head on each chain CTL_ANCHOR_EVM_* / CTL_ANCHOR_BTC_* configure: the anchoring
           transaction exists on the node's current chain, is --confirmations deep (default the
           variables'), comes from the pinned address (CTL_ANCHOR_EVM_ADDRESS with the pinned contract
           CTL_ANCHOR_EVM_CONTRACT; CTL_ANCHOR_BTC_ADDRESS) and carries this head, or an earlier head
           the service's current log contains. Exit 0 when every chain holds, 1 when one does not.
  --service  the gateway or authority (GET /admin/anchors with an admin key): its current head, the
           transactions it recorded (a Bitcoin-family chain is checked by txid) and its log, to check
           that an anchored head is part of it
  --checkpoint  a C2SP checkpoint (origin, size, base64 root) instead of the current head
  --tx     a transaction to check besides or instead of the service's records (EVM anchors are also
           found by the pinned contract's events from CTL_ANCHOR_EVM_FROM_BLOCK)
  deploy   deploys CtlAnchor (its anchorer: the signer's address unless --anchorer) or
           CtlRevocationTokens (its authority: the signer's, --burn-grace default 86400) with the
           signer of CTL_ANCHOR_EVM_KEY_FILE or _PKCS11_URI at CTL_ANCHOR_EVM_RPC_URL; prints the address`;

type Fetch = typeof fetch;

/** The service's admin API, read with the admin key. */
function serviceClient(base: string, key: string, doFetch: Fetch) {
  const get = async <T>(path: string): Promise<T> => {
    const res = await doFetch(`${base.replace(/\/+$/, '')}${path}`, { headers: { authorization: `Bearer ${key}` } });
    if (!res.ok) throw new Error(`${base}${path}: HTTP ${res.status}`);
    return (await res.json()) as T;
  };
  return {
    anchors: () =>
      get<{ logs: Array<{ origin: string; head: AnchorHead | null }>; jobs: ChainJobRecord[] }>(
        '/admin/anchors?kind=anchor&limit=1000',
      ),
    /** Whether the service's audit chain verifies and holds `h` (its entry at `size` has that hash). */
    async holds(h: AnchorHead): Promise<boolean> {
      const chain = await get<{ ok: boolean; count?: number }>('/admin/audit/verify');
      if (!chain.ok || (chain.count ?? 0) < h.size) return false;
      const page = await get<{ entries: Array<{ seq: number; hash: string }> }>(
        `/admin/audit?afterSeq=${h.size - 1}&limit=1`,
      );
      return page.entries[0]?.seq === h.size && page.entries[0]?.hash === h.root;
    },
  };
}

function refOf(text: string): AnchorRef {
  const m = /^(evm|btc):([0-9a-fA-Fx]{64,66})$/.exec(text);
  if (!m) throw new UsageError(`--tx: expected evm:0x<64 hex> or btc:<64 hex>, got '${text}'`);
  return { chain: m[1]!, txid: m[2]! };
}

async function verifyCommand(args: string[], env: Record<string, string | undefined>, doFetch: Fetch) {
  const p = parseArgs(args, {
    values: ['service', 'admin-key-file', 'checkpoint', 'origin', 'size', 'root', 'tx', 'confirmations'],
    flags: ['json'],
  });
  const settings = anchorSettingsFromEnv(env);
  if (!settings.evm && !settings.btc)
    throw new UsageError('no chain to check: set CTL_ANCHOR_EVM_* or CTL_ANCHOR_BTC_* (docs/operations.md)');
  const serviceUrl = one(p, 'service');
  const keyFile = one(p, 'admin-key-file');
  if (serviceUrl && !keyFile) throw new UsageError('--service needs --admin-key-file (an admin API key)');
  const service = serviceUrl
    ? serviceClient(serviceUrl, readText(keyFile!, 'the admin key').trim(), doFetch)
    : undefined;
  const listed = service ? await service.anchors() : undefined;

  let head: AnchorHead;
  const cp = one(p, 'checkpoint');
  if (cp) head = headOfCheckpoint(readText(cp, 'the checkpoint'));
  else if (one(p, 'size') !== undefined || one(p, 'root') !== undefined) {
    const size = Number(one(p, 'size'));
    head = { origin: one(p, 'origin') ?? '', size, root: (one(p, 'root') ?? '').toLowerCase() };
    try {
      checkAnchorHead(head);
    } catch (e) {
      throw new UsageError(`--origin/--size/--root: ${(e as Error).message}`);
    }
  } else {
    const logs = listed?.logs.filter((l) => !one(p, 'origin') || l.origin === one(p, 'origin')) ?? [];
    if (!service) throw new UsageError('give --checkpoint, --origin/--size/--root, or --service');
    if (!logs[0]?.head)
      throw new UsageError(`the service has no head to check${one(p, 'origin') ? ' of that origin' : ''}`);
    head = logs[0].head;
  }
  const refs: AnchorRef[] = [...(p.options.get('tx') ?? []).map(refOf)];
  for (const j of listed?.jobs ?? [])
    if (j.txid && j.chain === 'btc' && j.kind === 'anchor' && j.subject === head.origin)
      refs.push({ chain: j.chain, txid: j.txid, blockHash: j.blockHash });
  const need = one(p, 'confirmations');
  if (need !== undefined && !/^[1-9][0-9]{0,5}$/.test(need))
    throw new UsageError('--confirmations: a positive integer');
  // The head checked must be part of the service's log too, when it is given.
  const headHeld = service ? await service.holds(head) : true;
  const checks = await verifyAnchors({
    head,
    evm: settings.evm,
    btc: settings.btc,
    refs,
    confirmations: need === undefined ? undefined : Number(need),
    consistent: service ? (anchored) => service.holds(anchored) : undefined,
    fetch: doFetch,
  });
  const ok = headHeld && checks.every((c) => c.ok);
  if (p.flags.has('json')) console.log(JSON.stringify({ ok, head, headInServiceLog: headHeld, checks }, null, 2));
  else {
    console.log(`${head.origin} size ${head.size} root ${head.root}`);
    if (!headHeld)
      console.log('  service: REFUSED: the service log does not hold this head (or its chain does not verify)');
    for (const c of checks)
      console.log(
        c.ok
          ? `  ${c.chain}: ok: anchored size ${c.anchor!.size} in ${c.anchor!.txid} (block ${c.anchor!.blockNumber}, ` +
              `${c.anchor!.confirmations} confirmations)`
          : `  ${c.chain}: REFUSED: ${c.reason}`,
      );
  }
  return ok ? 0 : 1;
}

async function deployCommand(args: string[], env: Record<string, string | undefined>) {
  // Options first: an unknown flag is named even where the contract is missing.
  const what = args[0]?.startsWith('-') ? undefined : args[0];
  const p = parseArgs(what === undefined ? args : args.slice(1), { values: ['anchorer', 'authority', 'burn-grace'] });
  if (what !== 'anchor' && what !== 'revocations') throw new UsageError('deploy: anchor or revocations');
  const settings = anchorSettingsFromEnv(env);
  if (!settings.evm) throw new UsageError('deploy: set CTL_ANCHOR_EVM_RPC_URL, _CHAIN_ID and the signer');
  const signer = await openEvmAnchorSigner(settings.evm, env);
  try {
    const viem = await import('viem');
    const { evmAccount } = await import('../service-kit/chain/evm-signer.js');
    const { contractArtifact } = await import('../service-kit/chain/contracts.js');
    const chain = viem.defineChain({
      id: settings.evm.chainId,
      name: `chain ${settings.evm.chainId}`,
      nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
      rpcUrls: { default: { http: [settings.evm.rpcUrl] } },
    });
    const transport = viem.http(settings.evm.rpcUrl);
    const wallet = viem.createWalletClient({ chain, transport, account: await evmAccount(signer) });
    const pub = viem.createPublicClient({ chain, transport });
    const address = (flag: string) => {
      const v = one(p, flag) ?? signer.address;
      if (!/^0x[0-9a-fA-F]{40}$/.test(v)) throw new UsageError(`--${flag}: a 0x address`);
      return v as `0x${string}`;
    };
    const grace = one(p, 'burn-grace') ?? '86400';
    if (!/^[0-9]{1,10}$/.test(grace)) throw new UsageError('--burn-grace: seconds');
    const [name, ctorArgs, variable] =
      what === 'anchor'
        ? ['CtlAnchor', [address('anchorer')], 'CTL_ANCHOR_EVM_CONTRACT']
        : ['CtlRevocationTokens', [address('authority'), BigInt(grace)], 'CTL_ANCHOR_EVM_REVOCATION_CONTRACT'];
    const { abi, bytecode } = contractArtifact(name);
    const hash = await wallet.deployContract({ abi, bytecode, args: ctorArgs });
    let receipt;
    for (let i = 0; !receipt && i < 600; i++) {
      receipt = await pub.getTransactionReceipt({ hash }).catch(() => undefined);
      if (!receipt) await new Promise((r) => setTimeout(r, 500));
    }
    if (!receipt?.contractAddress || receipt.status !== 'success')
      throw new Error(`${name}: deployment ${hash} failed or not mined`);
    console.log(`${name} deployed at ${receipt.contractAddress} (tx ${hash}, block ${receipt.blockNumber})`);
    console.log(`${variable}=${receipt.contractAddress}`);
    return 0;
  } finally {
    await signer.close();
  }
}

/** `ctl anchor …`; `env` and `fetch` for tests. */
export async function main(
  args: string[],
  env: Record<string, string | undefined> = process.env,
  doFetch: Fetch = fetch,
): Promise<number> {
  return guard(USAGE, async () => {
    const [sub, ...rest] = args;
    if (!sub) return (console.error(USAGE), 2);
    if (sub === '--help' || sub === '-h' || rest.includes('--help') || rest.includes('-h'))
      return (console.log(USAGE), 0);
    try {
      if (sub === 'verify') return await verifyCommand(rest, env, doFetch);
      if (sub === 'deploy') return await deployCommand(rest, env);
    } catch (e) {
      if (e instanceof ConfigError) return (console.error(`ctl anchor: ${e.message}`), 2);
      if (e instanceof RangeError && !(e instanceof UsageError)) throw new UsageError(e.message);
      throw e;
    }
    throw new UsageError(`unknown subcommand ${sub}`);
  });
}
