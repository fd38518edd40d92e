/**
 * An in-memory EVM ledger behind the public `FacilitatorEvmSigner` interface of @x402/evm: the
 * stock facilitator's only way to the "chain" in the tests and the demo. It is an honest EIP-3009
 * token: `transferWithAuthorization` recovers the signer of the EIP-712 message in the token's own
 * domain (name, version, chain id, contract), checks the validity window against its clock,
 * refuses a nonce used before, checks the balance, moves it and emits Transfer and
 * AuthorizationUsed logs. Reads (balanceOf, name, version, authorizationState, a simulated
 * transfer) also arrive through Multicall3 `tryAggregate`, which it decodes and answers.
 *
 * The token also has ERC-20 allowances, and the ledger carries Permit2 and x402's `upto` proxy at
 * their canonical addresses (permit2.ts): a payer approves Permit2 once, signs a Permit2 witness
 * transfer for a maximum, and the facilitator settles any amount up to it.
 */
import {
  parseAbi,
  decodeFunctionData,
  encodeFunctionResult,
  encodeEventTopics,
  encodeAbiParameters,
  keccak256,
  toHex,
  getAddress,
  verifyTypedData,
  serializeSignature,
  encodeFunctionData,
  decodeEventLog,
  type Abi,
  type Hex,
  type Log,
} from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import type { FacilitatorEvmSigner } from '@x402/evm';
import {
  createPermit2,
  PERMIT2_ABI,
  PERMIT2_ADDRESS,
  MAX_UINT256,
  UPTO_PROXY_ABI,
  UPTO_PROXY_ADDRESS,
  type Permit2Settlement,
} from './permit2.js';

export const TOKEN_ABI = parseAbi([
  'function balanceOf(address account) view returns (uint256)',
  'function name() view returns (string)',
  'function version() view returns (string)',
  'function decimals() view returns (uint8)',
  'function allowance(address owner, address spender) view returns (uint256)',
  'function authorizationState(address authorizer, bytes32 nonce) view returns (bool)',
  // transferWithAuthorization(from, to, value, validAfter, validBefore, nonce, v, r, s | signature):
  // parameter names left out so each signature stays one literal (parseAbi infers its types from it).
  'function transferWithAuthorization(address, address, uint256, uint256, uint256, bytes32, uint8, bytes32, bytes32)',
  'function transferWithAuthorization(address, address, uint256, uint256, uint256, bytes32, bytes)',
  'event Transfer(address indexed from, address indexed to, uint256 value)',
  'event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)',
]);

/** Every contract on the ledger, for decoding calls that arrive as bytes (Multicall3, JSON-RPC). */
export const LEDGER_ABI = [...TOKEN_ABI, ...PERMIT2_ABI, ...UPTO_PROXY_ABI];

const MULTICALL3 = '0xca11bde05977b3631167028862be2a173976ca11';
const MULTICALL_ABI = parseAbi([
  'function tryAggregate(bool, (address target, bytes callData)[]) returns ((bool success, bytes returnData)[])',
]);

const TRANSFER_TYPES = {
  TransferWithAuthorization: [
    { name: 'from', type: 'address' },
    { name: 'to', type: 'address' },
    { name: 'value', type: 'uint256' },
    { name: 'validAfter', type: 'uint256' },
    { name: 'validBefore', type: 'uint256' },
    { name: 'nonce', type: 'bytes32' },
  ],
} as const;

export interface TokenConfig {
  address: `0x${string}`;
  name: string;
  version: string;
  chainId: number;
}

/** Base Sepolia USDC, the stock server's default asset for eip155:84532 ("$0.01" prices resolve to it). */
export const BASE_SEPOLIA_USDC: TokenConfig = {
  address: '0x036CbD53842c5426634e7929541eC2318f3dCF7e',
  name: 'USDC',
  version: '2',
  chainId: 84532,
};

export interface EvmLedger {
  signer: FacilitatorEvmSigner;
  token: TokenConfig;
  mint(to: string, amount: bigint): void;
  balanceOf(who: string): bigint;
  /** Set `owner`'s ERC-20 allowance to `spender` (the payer's own `approve` transaction). */
  approve(owner: string, spender: string, amount: bigint): void;
  allowance(owner: string, spender: string): bigint;
  /** Every successful transferWithAuthorization, in order. */
  transfers: { tx: Hex; from: string; to: string; value: bigint; nonce: Hex }[];
  /** Every successful `upto` proxy settle (a Permit2 witness transfer), in order. */
  permit2Transfers: (Permit2Settlement & { tx: Hex })[];
  /** Every log emitted, in order (what `eth_getLogs` would return). */
  logs: Log[];
  /** Calls that reverted, with the revert message. */
  reverts: string[];
  /** Seconds on the ledger's clock (default: the wall clock). */
  setClock(seconds: () => number): void;
  /**
   * What a reconcile may ask of a chain, shaped as viem's PublicClient: views (Permit2's
   * `nonceBitmap`, the token's `authorizationState`), a mined transaction (its calldata names the
   * permit's owner, nonce and settled amount), its receipt, and a contract's past events.
   */
  reader: LedgerReader;
}

export interface LedgerReader {
  readContract: FacilitatorEvmSigner['readContract'];
  getTransaction(a: { hash: Hex }): Promise<{ hash: Hex; from: Hex; to: Hex; input: Hex; blockNumber: bigint }>;
  getTransactionReceipt(a: { hash: Hex }): Promise<{ status: 'success'; transactionHash: Hex; logs: Log[] }>;
  /** Logs of `address` whose first topic is `eventName`'s, decoded with `abi`, from `fromBlock` on. */
  getContractEvents(a: {
    address: Hex;
    abi: Abi;
    eventName: string;
    fromBlock?: bigint;
  }): Promise<(Log & { eventName: string; args: unknown })[]>;
}

class Revert extends Error {}

const isPermit2 = (a: string) => {
  const x = a.toLowerCase();
  return x === PERMIT2_ADDRESS.toLowerCase() || x === UPTO_PROXY_ADDRESS.toLowerCase();
};

export function createEvmLedger(token: TokenConfig = BASE_SEPOLIA_USDC): EvmLedger {
  const tokenAddr = token.address.toLowerCase();
  const balances = new Map<string, bigint>();
  const allowances = new Map<string, bigint>();
  const used = new Set<string>();
  const receipts = new Map<Hex, { status: 'success'; logs: Log[] }>();
  const mined = new Map<Hex, { to: Hex; input: Hex; blockNumber: bigint }>();
  const transfers: EvmLedger['transfers'] = [];
  const permit2Transfers: EvmLedger['permit2Transfers'] = [];
  const logs: Log[] = [];
  const reverts: string[] = [];
  const facilitator = privateKeyToAccount(generatePrivateKey()).address;
  let clock = () => Math.floor(Date.now() / 1000);
  let txCount = 0;
  const bal = (a: string) => balances.get(a.toLowerCase()) ?? 0n;
  const allowance = (o: string, s: string) => allowances.get(`${o.toLowerCase()}:${s.toLowerCase()}`) ?? 0n;
  const fail = (m: string): never => {
    reverts.push(m);
    throw new Revert(m);
  };
  const permit2 = createPermit2({
    chainId: token.chainId,
    now: () => BigInt(clock()),
    balanceOf: bal,
    allowance,
    fail,
    transferFrom(spender, from, to, value) {
      const allowed = allowance(from, spender);
      if (allowed < value || bal(from) < value) fail('TRANSFER_FROM_FAILED');
      if (allowed !== MAX_UINT256) allowances.set(`${from.toLowerCase()}:${spender.toLowerCase()}`, allowed - value);
      balances.set(from.toLowerCase(), bal(from) - value);
      balances.set(to.toLowerCase(), bal(to) + value);
    },
  });

  /** A mined transaction (one per block): its logs get block fields; calldata and receipt are kept. */
  function mine(
    call: { to: Hex; input: Hex },
    emitted: { address: Hex; topics: readonly unknown[]; data: Hex }[],
  ): Hex {
    const tx = keccak256(toHex(`tx:${++txCount}:${call.input}`));
    mined.set(tx, { ...call, blockNumber: BigInt(txCount) });
    const base = {
      blockHash: keccak256(toHex(`block:${txCount}`)),
      blockNumber: BigInt(txCount),
      transactionHash: tx,
      transactionIndex: 0,
      removed: false,
    };
    const out = emitted.map((l, logIndex) => ({ ...base, ...l, logIndex })) as unknown as Log[];
    logs.push(...out);
    receipts.set(tx, { status: 'success', logs: out });
    return tx;
  }
  const domain = {
    name: token.name,
    version: token.version,
    chainId: token.chainId,
    verifyingContract: getAddress(token.address),
  };

  /** The checks of FiatTokenV2 `transferWithAuthorization`, in its order; `write` applies it. */
  async function transferWithAuthorization(args: readonly unknown[], write: boolean): Promise<Hex | undefined> {
    const [from, to, value, validAfter, validBefore, nonce] = args as [Hex, Hex, bigint, bigint, bigint, Hex];
    let signature: Hex;
    if (args.length === 9) {
      const [v, r, s] = args.slice(6) as [number | bigint, Hex, Hex];
      signature = serializeSignature({ r, s, v: BigInt(v) });
    } else signature = args[6] as Hex;
    const now = BigInt(clock());
    if (now <= validAfter) fail('FiatTokenV2: authorization is not yet valid');
    if (now >= validBefore) fail('FiatTokenV2: authorization is expired');
    if (used.has(`${from.toLowerCase()}:${nonce.toLowerCase()}`))
      fail('FiatTokenV2: authorization is used or canceled');
    let ok = false;
    try {
      ok = await verifyTypedData({
        address: from,
        domain,
        types: TRANSFER_TYPES,
        primaryType: 'TransferWithAuthorization',
        message: { from, to, value, validAfter, validBefore, nonce },
        signature,
      });
    } catch {
      ok = false;
    }
    if (!ok) fail('FiatTokenV2: invalid signature');
    if (bal(from) < value) fail('ERC20: transfer amount exceeds balance');
    if (!write) return undefined;
    used.add(`${from.toLowerCase()}:${nonce.toLowerCase()}`);
    balances.set(from.toLowerCase(), bal(from) - value);
    balances.set(to.toLowerCase(), bal(to) + value);
    const input = encodeFunctionData({ abi: TOKEN_ABI, functionName: 'transferWithAuthorization', args } as any);
    const tx = mine({ to: getAddress(token.address), input }, [
      {
        address: getAddress(token.address),
        topics: encodeEventTopics({
          abi: TOKEN_ABI,
          eventName: 'AuthorizationUsed',
          args: { authorizer: from, nonce },
        }),
        data: '0x',
      },
      transferLog(from, to, value),
    ]);
    transfers.push({ tx, from: from.toLowerCase(), to: to.toLowerCase(), value, nonce });
    return tx;
  }

  function transferLog(from: Hex, to: Hex, value: bigint) {
    return {
      address: getAddress(token.address),
      topics: encodeEventTopics({ abi: TOKEN_ABI, eventName: 'Transfer', args: { from, to } }),
      data: encodeAbiParameters([{ type: 'uint256' }], [value]),
    };
  }

  /** A transaction from the facilitator to the `upto` proxy's `settle`. */
  async function settleUpto(args: readonly unknown[]): Promise<Hex> {
    const s = await permit2.write(facilitator, args);
    const input = encodeFunctionData({ abi: UPTO_PROXY_ABI, functionName: 'settle', args } as any);
    const tx = mine({ to: UPTO_PROXY_ADDRESS, input }, [
      transferLog(s.owner as Hex, s.to as Hex, s.amount),
      {
        address: UPTO_PROXY_ADDRESS,
        topics: encodeEventTopics({ abi: UPTO_PROXY_ABI, eventName: 'Settled' }),
        data: '0x',
      },
    ]);
    permit2Transfers.push({ ...s, tx });
    return tx;
  }

  async function read(address: string, functionName: string, args: readonly unknown[] = []): Promise<unknown> {
    if (isPermit2(address)) return permit2.read(address, functionName, args, facilitator);
    if (address.toLowerCase() !== tokenAddr) throw new Revert(`no contract at ${address}`);
    switch (functionName) {
      case 'balanceOf':
        return bal(args[0] as string);
      case 'name':
        return token.name;
      case 'version':
        return token.version;
      case 'decimals':
        return 6;
      case 'allowance':
        return allowance(args[0] as string, args[1] as string);
      case 'authorizationState':
        return used.has(`${(args[0] as string).toLowerCase()}:${(args[1] as string).toLowerCase()}`);
      case 'transferWithAuthorization':
        return transferWithAuthorization(args, false); // eth_call: simulate
      default:
        throw new Revert(`unknown function ${functionName}`);
    }
  }

  const signer: FacilitatorEvmSigner = {
    getAddresses: () => [facilitator],
    async getCode({ address }) {
      // The token is a contract; payers are EOAs (so signatures are checked with ECDSA, not ERC-1271).
      const a = address.toLowerCase();
      return a === tokenAddr || a === MULTICALL3 || isPermit2(a) ? '0x6080604052' : '0x';
    },
    async readContract({ address, functionName, args }) {
      if (address.toLowerCase() === MULTICALL3 && functionName === 'tryAggregate') {
        const calls = (args?.[1] ?? []) as { target: Hex; callData: Hex }[];
        const out = [];
        for (const c of calls) {
          try {
            const d = decodeFunctionData({ abi: LEDGER_ABI, data: c.callData });
            const result = await read(c.target, d.functionName, (d.args ?? []) as readonly unknown[]);
            const returnData =
              d.functionName === 'transferWithAuthorization' || d.functionName === 'settle'
                ? '0x'
                : encodeFunctionResult({ abi: LEDGER_ABI, functionName: d.functionName as any, result: result as any });
            out.push({ success: true, returnData });
          } catch {
            out.push({ success: false, returnData: '0x' as Hex });
          }
        }
        return out;
      }
      return read(address, functionName, args ?? []);
    },
    async verifyTypedData(a) {
      return verifyTypedData(a as Parameters<typeof verifyTypedData>[0]);
    },
    async writeContract({ address, functionName, args }) {
      if (getAddress(address) === UPTO_PROXY_ADDRESS && functionName === 'settle') return settleUpto(args);
      if (address.toLowerCase() !== tokenAddr || functionName !== 'transferWithAuthorization')
        throw new Revert(`cannot write ${functionName} at ${address}`);
      return (await transferWithAuthorization(args, true))!;
    },
    async sendTransaction() {
      throw new Revert('this ledger runs no arbitrary transactions');
    },
    async waitForTransactionReceipt({ hash }) {
      const r = receipts.get(hash);
      if (!r) throw new Error(`no transaction ${hash}`);
      return r;
    },
  };

  return {
    signer,
    token,
    mint: (to, amount) => balances.set(to.toLowerCase(), bal(to) + amount),
    balanceOf: bal,
    approve: (owner, spender, amount) => allowances.set(`${owner.toLowerCase()}:${spender.toLowerCase()}`, amount),
    allowance,
    transfers,
    permit2Transfers,
    logs,
    reverts,
    setClock: (s) => (clock = s),
    reader: {
      readContract: signer.readContract,
      async getTransaction({ hash }) {
        const t = mined.get(hash);
        if (!t) throw new Error(`no transaction ${hash}`);
        return { hash, from: facilitator, ...t };
      },
      async getTransactionReceipt({ hash }) {
        const r = receipts.get(hash);
        if (!r) throw new Error(`no transaction ${hash}`);
        return { ...r, transactionHash: hash };
      },
      async getContractEvents({ address, abi, eventName, fromBlock = 0n }) {
        const [topic] = encodeEventTopics({ abi, eventName } as any);
        return logs
          .filter((l) => getAddress(l.address) === getAddress(address) && l.topics[0] === topic)
          .filter((l) => (l.blockNumber ?? 0n) >= fromBlock)
          .map((l) => ({ ...l, ...decodeEventLog({ abi, data: l.data, topics: l.topics }) }) as any);
      },
    },
  };
}
