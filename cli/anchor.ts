/**
 * `ctl anchor verify` checks that a log's signed checkpoint (a file, the one a service serves, or
 * the one a receipt's inclusion proof leads to) is anchored on every chain the CTL_ANCHOR_*
 * variables configure, trusting only the chains, the pinned contract and address, and the pinned
 * log key (service-kit/anchor/verify.ts); an anchor of another size counts when the log proves the
 * two trees consistent. A service whose log is off anchors its audit chain's head, checked against
 * that chain. `ctl anchor deploy` deploys the anchoring contract or the revocation-token contract
 * with the configured signer.
 */
import { guard, one, parseArgs, readText, UsageError } from './device/args.js';
import { ConfigError } from '../service-kit/config.js';
import {
  anchorSettingsFromEnv,
  openEvmAnchorSigner,
  verifyAnchors,
  type AnchorHead,
  type AnchorRef,
  type VerifyAnchorsInput,
} from '../service-kit/anchor/index.js';
import { serviceClient, type ServiceClient } from './anchor/service.js';
import { pinnedVkey, subjectToCheck, type Subject } from './anchor/subject.js';

const USAGE = `usage: ctl anchor verify [--service URL [--admin-key-file FILE]] [--vkey VKEY|@FILE]
                         [--receipt FILE | --grant FILE | --checkpoint FILE | --origin O --size N --root HEX]
                         [--tx evm:HASH|btc:TXID ...] [--confirmations N] [--json]
       ctl anchor deploy anchor|revocations [--anchorer ADDRESS | --authority ADDRESS] [--burn-grace SECONDS]

  verify   checks a log's checkpoint on each chain CTL_ANCHOR_EVM_* / CTL_ANCHOR_BTC_* configure: the
           anchoring transaction exists on the node's current chain, is --confirmations deep (default
           the variables'), comes from the pinned address (CTL_ANCHOR_EVM_ADDRESS with the pinned
           contract CTL_ANCHOR_EVM_CONTRACT; CTL_ANCHOR_BTC_ADDRESS) and anchors this checkpoint, or
           one the log proves consistent with it (GET /log/proof/consistency). Exit 0 when every step
           and chain holds, 1 when one does not, 2 usage.
  --service  the gateway or authority: its log (public) proves consistency and serves the checkpoint
           checked by default; with --admin-key-file (GET /admin/anchors) its anchor records too (a
           Bitcoin-family chain is checked by the txids recorded), and its audit chain when its log
           is off (what it then anchors)
  --vkey   the log's note verifier key (pinned: never taken from the service), for any checkpoint
  --receipt, --grant  a gateway receipt or an authority grant (JSON): its inclusion proof from
           --service, checked, leads to the checkpoint checked; the anchor must cover its entry
  --checkpoint  a C2SP checkpoint note (signed by --vkey) instead of the served one
  --tx     a transaction to check besides or instead of the service's records (EVM anchors are also
           found by the pinned contract's events from CTL_ANCHOR_EVM_FROM_BLOCK)
  deploy   deploys CtlAnchor (its anchorer: the signer's address unless --anchorer) or
           CtlRevocationTokens (its authority: the signer's, --burn-grace default 86400) with the
           signer of CTL_ANCHOR_EVM_KEY_FILE or _PKCS11_URI at CTL_ANCHOR_EVM_RPC_URL; prints the address`;

type Fetch = typeof fetch;

function refOf(text: string): AnchorRef {
  const m = /^(evm|btc):([0-9a-fA-Fx]{64,66})$/.exec(text);
  if (!m) throw new UsageError(`--tx: expected evm:0x<64 hex> or btc:<64 hex>, got '${text}'`);
  return { chain: m[1]!, txid: m[2]! };
}

/** How an anchored head of another size is proven part of the subject's log, when the service can tell. */
function consistencyOf(subject: Subject, service: ServiceClient | undefined): VerifyAnchorsInput['consistent'] {
  if (!service) return undefined;
  if (subject.source === 'checkpoint') return (older, newer) => service.logConsistent(older, newer);
  if (!service.admin) return undefined;
  return async (older, newer) => (await service.auditHolds(older)) && (await service.auditHolds(newer));
}

function report(head: AnchorHead, subject: Subject, checks: Awaited<ReturnType<typeof verifyAnchors>>) {
  console.log(`${head.origin} size ${head.size} root ${head.root} (${subject.source})`);
  for (const line of [...subject.steps, ...subject.problems]) console.log(`  ${line}`);
  for (const c of checks)
    console.log(
      c.ok
        ? `  ${c.chain}: ok: anchored size ${c.anchor!.size} in ${c.anchor!.txid} (block ${c.anchor!.blockNumber}, ` +
            `${c.anchor!.confirmations} confirmations)`
        : `  ${c.chain}: REFUSED: ${c.reason}`,
    );
}

async function verifyCommand(args: string[], env: Record<string, string | undefined>, doFetch: Fetch) {
  const p = parseArgs(args, {
    values: [
      ...['service', 'admin-key-file', 'vkey', 'checkpoint', 'receipt', 'grant'],
      ...['origin', 'size', 'root', 'tx', 'confirmations'],
    ],
    flags: ['json'],
  });
  const settings = anchorSettingsFromEnv(env);
  if (!settings.evm && !settings.btc)
    throw new UsageError('no chain to check: set CTL_ANCHOR_EVM_* or CTL_ANCHOR_BTC_* (docs/operations.md)');
  const serviceUrl = one(p, 'service');
  const keyFile = one(p, 'admin-key-file');
  if (keyFile && !serviceUrl) throw new UsageError('--admin-key-file goes with --service');
  const adminKey = keyFile ? readText(keyFile, 'the admin key').trim() : undefined;
  const service = serviceUrl ? serviceClient(serviceUrl, adminKey, doFetch) : undefined;
  const listed = service?.admin ? await service.anchors() : undefined;
  const vkey = one(p, 'vkey');
  const subject = await subjectToCheck({
    checkpoint: one(p, 'checkpoint'),
    receipt: one(p, 'receipt'),
    grant: one(p, 'grant'),
    origin: one(p, 'origin'),
    size: one(p, 'size'),
    root: one(p, 'root'),
    vkey: vkey === undefined ? undefined : pinnedVkey(vkey),
    service,
    listed,
  });
  const { head } = subject;
  const refs: AnchorRef[] = [...(p.options.get('tx') ?? []).map(refOf)];
  for (const j of listed?.jobs ?? [])
    if (j.txid && j.chain === 'btc' && j.kind === 'anchor' && j.subject === head.origin)
      refs.push({ chain: j.chain, txid: j.txid, blockHash: j.blockHash });
  const need = one(p, 'confirmations');
  if (need !== undefined && !/^[1-9][0-9]{0,5}$/.test(need))
    throw new UsageError('--confirmations: a positive integer');
  // An audit head checked must be part of the service's chain (a checkpoint is checked by its signature).
  if (subject.source === 'audit-head' && service?.admin && !(await service.auditHolds(head)))
    subject.problems.push('service: REFUSED: the service log does not hold this head (or its chain does not verify)');
  const checks = await verifyAnchors({
    head,
    evm: settings.evm,
    btc: settings.btc,
    refs,
    confirmations: need === undefined ? undefined : Number(need),
    consistent: consistencyOf(subject, service),
    minSize: subject.minSize,
    fetch: doFetch,
  });
  const ok = subject.problems.length === 0 && checks.every((c) => c.ok);
  if (p.flags.has('json'))
    console.log(
      JSON.stringify(
        { ok, head, source: subject.source, steps: subject.steps, problems: subject.problems, checks },
        null,
        2,
      ),
    );
  else report(head, subject, checks);
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
      if (e instanceof UsageError || !(e instanceof Error)) throw e;
      // A service or node that cannot answer (or answers nonsense): no verdict, said in one line.
      console.error(`ctl anchor ${sub}: ${e.message}`);
      return 1;
    }
    throw new UsageError(`unknown subcommand ${sub}`);
  });
}
