/**
 * The EVM authorizations the gateway signed (an EIP-3009 `transferWithAuthorization`, or an x402
 * `upto` Permit2 permit): what reconcile needs to know of each, written before it leaves the
 * gateway, so a signature that is out in the world is never forgotten (PROTOCOL.md §7): when it
 * stops being cashable (`valid_before`), who signed it with which nonce, and what the merchant
 * said of it (`outcome`, a transaction). Each scheme keeps its own table (x402's
 * `gw_x402_payments`, MPP's `gw_mpp_payments`: its migrations in its folder) of the same common
 * columns, plus its own; the SQL over them is written here once.
 */
import type { SqlExecutor } from '../../../service-kit/index.js';
import { eip3009Check, type ChainDisagreement } from './settled.js';
import type { EvmChainReader } from './chain.js';

/** What a signed payload commits the gateway to, read back from it (decimal strings, as signed). */
export interface SignedAuthorization {
  from: string;
  to: string;
  /** Atomic units: the value (EIP-3009) or the permit's maximum (`upto`). */
  value: string;
  /** Epoch seconds: the authorization's `validBefore` (a permit's deadline). */
  validBefore: string;
  nonce: string;
}

/** The name of a scheme's table of signed authorizations (a code constant, never input). */
export type AuthorizationTable = string;

/** The common record of a signed authorization. */
export interface AuthorizationRecord {
  paymentId: string;
  network: string;
  asset: string;
  payTo: string;
  payer: string;
  nonce: string;
  /** Epoch milliseconds: the authorization's `validBefore`. */
  validBefore: number;
  tx: string | null;
  outcome: string | null;
  /** `upto`: a Permit2 witness transfer of at most the payment's amount; null: EIP-3009 of the whole amount. */
  scheme: string | null;
  /** `upto`: the atomic amount settled, as last read. */
  settled: string | null;
  /** `upto`: the chain's head when the permit was signed (null: no reader numbered blocks then). */
  fromBlock: bigint | null;
}

/** The columns every table has; a scheme's own (`extra`) are named by the scheme's store. */
export type AuthorizationInput = Pick<
  AuthorizationRecord,
  'paymentId' | 'network' | 'asset' | 'payTo' | 'payer' | 'nonce' | 'validBefore'
>;

/** Writes a signed authorization before it leaves: common columns, then the scheme's `extra` ones. */
export async function insertAuthorization(
  q: SqlExecutor,
  t: AuthorizationTable,
  r: AuthorizationInput,
  extra: Record<string, string | number | null>,
  now: number,
): Promise<void> {
  const own = Object.keys(extra);
  const columns = ['payment_id', 'network', 'asset', 'pay_to', 'payer', 'nonce', 'valid_before', 'created_at', ...own];
  await q.run(`INSERT INTO ${t} (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`, [
    r.paymentId,
    r.network,
    r.asset,
    r.payTo,
    r.payer,
    r.nonce,
    r.validBefore,
    now,
    ...own.map((k) => extra[k]!),
  ]);
}

/**
 * Records what the merchant (or the chain) said of a signed authorization: `paid`, `refused`,
 * `pending`, `unknown`, `expired-unverified`, `upto`'s `zero`; any transaction and, for `upto`,
 * the amount settled (only x402's table has the column).
 */
export async function recordAuthorizationOutcome(
  q: SqlExecutor,
  t: AuthorizationTable,
  paymentId: string,
  outcome: string,
  tx?: string,
  settled?: bigint,
): Promise<void> {
  const set = settled === undefined ? '' : ', settled = ?';
  await q.run(`UPDATE ${t} SET outcome = ?, tx = COALESCE(?, tx)${set} WHERE payment_id = ?`, [
    outcome,
    tx ?? null,
    ...(settled === undefined ? [] : [settled.toString()]),
    paymentId,
  ]);
}

/** The record of payment `paymentId` with the row it was read from (for a scheme's own columns). */
export async function authorizationById(
  q: SqlExecutor,
  t: AuthorizationTable,
  paymentId: string,
): Promise<{ record: AuthorizationRecord; row: Record<string, unknown> } | undefined> {
  const r = await q.get(`SELECT * FROM ${t} WHERE payment_id = ?`, [paymentId]);
  if (!r) return undefined;
  const record: AuthorizationRecord = {
    paymentId: r.payment_id as string,
    network: r.network as string,
    asset: r.asset as string,
    payTo: r.pay_to as string,
    payer: r.payer as string,
    nonce: r.nonce as string,
    validBefore: Number(r.valid_before),
    tx: (r.tx as string | null) ?? null,
    outcome: (r.outcome as string | null) ?? null,
    scheme: (r.scheme as string | null | undefined) ?? null,
    settled: (r.settled as string | null | undefined) ?? null,
    fromBlock: r.from_block === null || r.from_block === undefined ? null : BigInt(r.from_block as string),
  };
  return { record, row: r };
}

/** What the gateway chose to pay, that a signed payload must say exactly before it may leave. */
export interface ChosenAuthorization {
  payTo: string;
  amount: bigint;
  /** The gateway's own account. */
  payer: string;
  /** Epoch milliseconds: the latest `validBefore` the policy allows (its validity cap). */
  latestValidBefore: number;
}

/**
 * Whether the signed authorization is the one chosen (payee, value, payer, a validity within the
 * cap): a stock client that drifted from the gateway's choice signs nothing that leaves.
 */
export function signedAsChosen(s: SignedAuthorization | undefined, c: ChosenAuthorization): boolean {
  return (
    s !== undefined &&
    Number(s.validBefore) * 1000 <= c.latestValidBefore &&
    s.to.toLowerCase() === c.payTo.toLowerCase() &&
    BigInt(s.value) === c.amount &&
    s.from.toLowerCase() === c.payer.toLowerCase()
  );
}

/**
 * A merchant reported an EIP-3009 authorization cashed in `reportedTx` (x402 `exact`, MPP `evm`
 * charge): only the signed value can move, so it is paid whatever the chain says; the chain checks
 * the claim (settled.ts eip3009Check), and the receipt names the merchant's transaction only when
 * the chain does not contradict it (else the authorization itself).
 */
export async function eip3009Paid(
  reader: EvmChainReader | undefined,
  a: { network: string; asset: string; payer: string; nonce: string; value: bigint },
  reportedTx: string,
): Promise<{ tx: string; disagreement?: ChainDisagreement }> {
  const check = await eip3009Check(reader, { ...a, reportedTx });
  const tx = check.tx ?? `${a.network}/${a.asset}/${a.nonce}`;
  return { tx, ...(check.disagreement ? { disagreement: check.disagreement } : {}) };
}
