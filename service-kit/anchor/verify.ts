/**
 * Checking an anchor on its chain, trusting only the chain and the pinned configuration (what
 * `ctl anchor verify` runs): the transaction exists on the node's current chain, is at least
 * N blocks deep, was sent by the pinned anchoring address (EVM: the transaction's sender and the
 * pinned contract's event; Bitcoin-family: every input spends a coin of the pinned address) and
 * carries this origin's head; and that anchored head is the head checked, or one the checked head
 * is consistent with, before or after it (`consistent`: for a transparency log's checkpoint, an
 * RFC 9162 consistency proof; for the audit head of a service whose log is off, the chain's entry
 * at that size has that hash). A service's own records (txids it lists) only say where to look:
 * each is checked like any other claim.
 */
import type { Hex, PublicClient } from 'viem';
import { ANCHORED_EVENT, CTL_ANCHOR_ABI } from '../chain/contracts.js';
import { createJsonRpc, JsonRpcError, redactRpcUrl } from '../chain/json-rpc.js';
import type { BtcAnchorSettings, EvmAnchorSettings } from './config.js';
import { opReturnData, originSha256, parseBtcAnchorPayload, type AnchorHead } from './head.js';

/** A transaction that is said to anchor the origin (from the service's records, or given by hand). */
export interface AnchorRef {
  chain: string;
  txid: string;
  blockHash?: string | null;
}

/** One anchor found on a chain and what was wrong with it, if anything. */
export interface AnchorCandidate {
  txid: string;
  size?: number;
  root?: string;
  blockNumber?: number;
  confirmations?: number;
  refused?: string;
}

export interface AnchorCheck {
  chain: string;
  ok: boolean;
  /** Why it fails (the newest refusal when no anchor passed). */
  reason?: string;
  /** The anchor the check rests on. */
  anchor?: AnchorCandidate & { size: number; root: string };
  /** Everything looked at (refused ones with their reason). */
  candidates: AnchorCandidate[];
}

export interface VerifyAnchorsInput {
  head: AnchorHead;
  /**
   * Whether `older` is part of the log whose head is `newer` (one of them anchored, the other
   * `head`): for a checkpoint, an RFC 9162 §2.1.4 consistency proof from the log; for the audit
   * head, the chain's entries. True, or false or the reason it is not. Without it only an anchor
   * of exactly `head` counts.
   */
  consistent?: (older: AnchorHead, newer: AnchorHead) => Promise<boolean | string>;
  /** Entries the anchor must cover (a receipt logged at index i: i + 1); default none. */
  minSize?: number;
  refs?: AnchorRef[];
  evm?: EvmAnchorSettings;
  btc?: BtcAnchorSettings;
  /** Over the settings' depth. */
  confirmations?: number;
  fetch?: typeof fetch;
}

type Anchored = AnchorCandidate & { size: number; root: string };

/**
 * Picks what the valid candidates prove about `head`: an anchor of exactly it, or the nearest
 * anchors before and after it, each proven part of one log with it. The anchor after is checked
 * too: one that is not consistent is a log that forked (or was rewritten) since `head`.
 */
async function conclude(chain: string, input: VerifyAnchorsInput, found: AnchorCandidate[]): Promise<AnchorCheck> {
  const { head } = input;
  const refuse = (reason: string): AnchorCheck => ({ chain, ok: false, reason, candidates: found });
  const valid = found.filter((c) => !c.refused) as Anchored[];
  // Another root for this size, by the pinned anchorer itself, is a log that forked (or was rewritten).
  const other = valid.find((c) => c.size === head.size && c.root !== head.root);
  if (other)
    return refuse(`the chain anchors size ${head.size} of ${head.origin} with root ${other.root}, not ${head.root}`);
  const exact = valid.find((c) => c.size === head.size);
  const before = valid.filter((c) => c.size < head.size).sort((a, b) => b.size - a.size)[0];
  const after = valid.filter((c) => c.size > head.size).sort((a, b) => a.size - b.size)[0];
  if (!exact && !before && !after) {
    const refused = found.filter((c) => c.refused);
    return refuse(refused.length ? refused[refused.length - 1]!.refused! : `no anchor of ${head.origin} on this chain`);
  }
  const min = input.minSize ?? 0;
  if (!input.consistent) {
    if (exact) return { chain, ok: true, anchor: exact, candidates: found };
    const near = [before, after].filter((c): c is Anchored => c !== undefined).map((c) => c.size);
    return refuse(`no anchor of size ${head.size}; the nearest anchored sizes are ${near.join(' and ')}`);
  }
  for (const c of [before, after]) {
    if (!c) continue;
    const anchored = { origin: head.origin, size: c.size, root: c.root };
    const verdict = c === before ? await input.consistent(anchored, head) : await input.consistent(head, anchored);
    if (verdict === true) continue;
    const why = typeof verdict === 'string' ? `: ${verdict}` : '';
    return refuse(
      c === before
        ? `the anchored head (size ${c.size}, root ${c.root}) is not part of this log${why}`
        : `this head is not part of the later anchored head (size ${c.size}, root ${c.root}): the log forked${why}`,
    );
  }
  const covering = exact ?? (before && before.size >= min ? before : undefined) ?? after;
  if (!covering)
    return refuse(`the newest anchor (size ${before!.size}) does not cover entry ${min - 1} yet: anchored later`);
  return { chain, ok: true, anchor: covering, candidates: found };
}

/** Blocks per eth_getLogs call (public nodes refuse ranges much wider). */
const LOG_WINDOW = 5000n;

async function evmCandidates(s: EvmAnchorSettings, input: VerifyAnchorsInput): Promise<AnchorCandidate[] | string> {
  if (!s.contract) return 'CTL_ANCHOR_EVM_CONTRACT (the pinned anchoring contract) is not set';
  if (!s.address) return 'CTL_ANCHOR_EVM_ADDRESS (the pinned anchoring address) is not set';
  const viem = await import('viem');
  const client = viem.createPublicClient({
    transport: viem.http(s.rpcUrl, { retryCount: 0, ...(input.fetch ? { fetchFn: input.fetch } : {}) }),
  }) as PublicClient;
  const chainId = await client.getChainId();
  if (chainId !== s.chainId) return `${redactRpcUrl(s.rpcUrl)} is chain ${chainId}, not ${s.chainId}`;
  const need = input.confirmations ?? s.confirmations;
  const tip = await client.getBlockNumber({ cacheTime: 0 });
  const contract = s.contract.toLowerCase();
  const anchored = viem.toEventSelector('Anchored(bytes32,uint64,bytes32,string)');
  const originHash = viem.keccak256(viem.toBytes(input.head.origin));
  const refs = (input.refs ?? []).filter((r) => r.chain === 'evm');
  const hashes: Hex[] = refs.map((r) => r.txid as Hex);
  // Found by the pinned contract's events, in windows: public nodes bound a getLogs range.
  for (let from = BigInt(s.fromBlock); !refs.length && from <= tip; from += LOG_WINDOW) {
    const to = from + LOG_WINDOW - 1n < tip ? from + LOG_WINDOW - 1n : tip;
    const logs = await client.getLogs({
      address: s.contract,
      event: ANCHORED_EVENT,
      args: { originHash },
      fromBlock: from,
      toBlock: to,
    });
    hashes.push(...logs.map((l) => l.transactionHash!));
  }
  const out: AnchorCandidate[] = [];
  for (const hash of [...new Set(hashes)]) {
    const c: AnchorCandidate = { txid: hash };
    out.push(c);
    const receipt = await client.getTransactionReceipt({ hash }).catch(() => undefined);
    if (!receipt) {
      c.refused = `transaction ${hash} is not on the chain (never mined, or reorganised away)`;
      continue;
    }
    c.blockNumber = Number(receipt.blockNumber);
    const block = await client.getBlock({ blockNumber: receipt.blockNumber }).catch(() => undefined);
    if (!block || block.hash !== receipt.blockHash) {
      c.refused = `block ${c.blockNumber} of ${hash} is no longer on the chain (reorganised)`;
      continue;
    }
    c.confirmations = Number(tip - receipt.blockNumber) + 1;
    const logs = receipt.logs.filter((l) => l.topics[0] === anchored);
    const ours = logs.filter((l) => l.address.toLowerCase() === contract);
    if (ours.length === 0) {
      c.refused = logs.length
        ? `the Anchored event of ${hash} comes from ${logs[0]!.address}, not the pinned contract ${s.contract}`
        : `${hash} emitted no Anchored event`;
      continue;
    }
    if (receipt.from.toLowerCase() !== s.address.toLowerCase()) {
      c.refused = `${hash} was sent by ${receipt.from}, not the pinned anchoring address ${s.address}`;
      continue;
    }
    const ev = viem.decodeEventLog({ abi: CTL_ANCHOR_ABI, data: ours[0]!.data, topics: ours[0]!.topics });
    const args = ev.args as { origin: string; size: bigint; root: Hex };
    if (args.origin !== input.head.origin) {
      c.refused = `${hash} anchors ${args.origin}, not ${input.head.origin}`;
      continue;
    }
    c.size = Number(args.size);
    c.root = args.root.slice(2);
    if (c.confirmations < need) c.refused = `${hash} has ${c.confirmations} confirmations, fewer than ${need}`;
  }
  return out;
}

type RawTx = {
  txid: string;
  confirmations?: number;
  blockhash?: string;
  vin: Array<{ txid?: string; vout?: number; coinbase?: string }>;
  vout: Array<{ n: number; scriptPubKey: { hex: string; address?: string; addresses?: string[] } }>;
};

async function btcCandidates(s: BtcAnchorSettings, input: VerifyAnchorsInput): Promise<AnchorCandidate[] | string> {
  const refs = (input.refs ?? []).filter((r) => r.chain === 'btc');
  if (refs.length === 0) return 'no transaction to check: give its txid (--tx btc:<txid>) or the service (--service)';
  const rpc = createJsonRpc({ url: s.rpcUrl, credentials: s.credentials, fetch: input.fetch, version: '1.0' });
  const need = input.confirmations ?? s.confirmations;
  const originHash = originSha256(input.head.origin).toString('hex');
  const addressesOf = (o: RawTx['vout'][number]) =>
    o.scriptPubKey.addresses ?? (o.scriptPubKey.address ? [o.scriptPubKey.address] : []);
  const out: AnchorCandidate[] = [];
  for (const ref of refs) {
    const c: AnchorCandidate = { txid: ref.txid };
    out.push(c);
    let tx: RawTx;
    try {
      tx = await rpc<RawTx>('getrawtransaction', [ref.txid, true]);
    } catch (e) {
      if (!(e instanceof JsonRpcError) || !e.answered) throw e;
      c.refused =
        `transaction ${ref.txid} is not known to the node ` + '(not on the chain; a verifying node needs -txindex)';
      continue;
    }
    c.confirmations = tx.confirmations ?? 0;
    if (!tx.blockhash || c.confirmations < 1) {
      c.refused = `${ref.txid} is not in a block of the current chain (unconfirmed or reorganised away)`;
      continue;
    }
    c.blockNumber = (await rpc<{ height: number }>('getblockheader', [tx.blockhash])).height;
    const payloads = tx.vout
      .map((o) => opReturnData(o.scriptPubKey.hex))
      .map((d) => (d ? parseBtcAnchorPayload(d) : undefined))
      .filter((p) => p !== undefined);
    const mine = payloads.find((p) => p!.originHash === originHash);
    if (!mine) {
      c.refused = payloads.length ? `${ref.txid} anchors another origin` : `${ref.txid} carries no CTL anchor`;
      continue;
    }
    for (const vin of tx.vin) {
      if (vin.txid === undefined || vin.vout === undefined) {
        c.refused = `${ref.txid} spends a coinbase, not a coin of the pinned address`;
        break;
      }
      const prev = await rpc<RawTx>('getrawtransaction', [vin.txid, true]);
      const from = addressesOf(prev.vout.find((o) => o.n === vin.vout)!);
      if (from.length !== 1 || from[0] !== s.address) {
        const who = from.join(',') || 'an unknown script';
        c.refused = `${ref.txid} spends a coin of ${who}, not the pinned address ${s.address}`;
        break;
      }
    }
    if (c.refused) continue;
    c.size = mine.size;
    c.root = mine.root;
    if (c.confirmations < need) c.refused = `${ref.txid} has ${c.confirmations} confirmations, fewer than ${need}`;
  }
  return out;
}

/**
 * Checks `head` on every chain configured in `input`; one result per chain.
 * @example const checks = await verifyAnchors({ head, evm: settings.evm, btc: settings.btc, refs, consistent })
 */
export async function verifyAnchors(input: VerifyAnchorsInput): Promise<AnchorCheck[]> {
  const out: AnchorCheck[] = [];
  for (const [chain, settings, find] of [
    ['evm', input.evm, evmCandidates],
    ['btc', input.btc, btcCandidates],
  ] as const) {
    if (!settings) continue;
    let found: AnchorCandidate[] | string;
    try {
      found = await (find as (s: typeof settings, i: VerifyAnchorsInput) => Promise<AnchorCandidate[] | string>)(
        settings,
        input,
      );
    } catch (e) {
      out.push({ chain, ok: false, reason: `the node could not be read: ${(e as Error).message}`, candidates: [] });
      continue;
    }
    out.push(
      typeof found === 'string'
        ? { chain, ok: false, reason: found, candidates: [] }
        : await conclude(chain, input, found),
    );
  }
  return out;
}
