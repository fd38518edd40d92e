/**
 * What a 402 payment scheme is (spec §4.2 "payment rails are pluggable"): an adapter that only
 * speaks its wire format. It reads a merchant's 402 into an offer, chooses what to pay, signs it,
 * names the paid retry's headers and reads the merchant's answer into an Outcome. The paid
 * exchange itself (the reservation before any signature, the check, the record, `paying`, the
 * retry, commit or hold) is payments/exchange.ts, written once for every scheme.
 *
 * A scheme is one folder under payments/schemes/ exporting a SchemeModule, and one line in
 * payments/registry.ts.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { PrivateKeyAccount } from 'viem/accounts';
import type { Migration, SqlDatabase } from '../../../service-kit/index.js';
import type { SessionRecord } from '../../sessions/store.js';
import type { ForwardResponse } from '../../net/forwarder.js';
import type { Rail } from '../rail.js';
import type { Authorization } from '../service.js';
import type { X402AssetMap } from '../evm/assets.js';
import type { EvmChainReader } from '../evm/chain.js';
import type { ChainDisagreement } from '../evm/settled.js';
import type { AuthorizationInput, ChosenAuthorization, SignedAuthorization } from '../evm/authorizations.js';

/** A merchant's answer as a scheme reads it. */
export type MerchantAnswer = { status: number; headers: IncomingHttpHeaders; body: Buffer };

export interface PaymentScheme<Offer = any, Chosen = any> {
  /** The rail its reservations name (x402, mpp; the gateway's own rail for X-Payment). */
  readonly name: string;
  /** How its refusals name it (`x402: …`, `MPP: …`). */
  readonly title: string;
  /**
   * Cheap and synchronous: the 402's offer when it speaks this scheme, else undefined. Throws
   * `payment_terms_refused` when it does but cannot be read.
   */
  detect(res: MerchantAnswer): Offer | undefined;
  /**
   * What to pay of the offer (policy: currency, assets, validity): nothing reserved, nothing
   * signed. Undefined: not this scheme's 402 after all (the next scheme that knows it pays it).
   */
  choose(offer: Offer, session: SessionRecord): Promise<Choice<Chosen> | undefined>;
  /**
   * Signs the choice. `authorize()` runs the session's checks and the reservation and returns it
   * with its SBA: the scheme calls it once, at the moment before a signature can exist, and lets its
   * refusal through untouched (then nothing was reserved and nothing may be signed).
   */
  sign(choice: Choice<Chosen>, authorize: () => Promise<Authorization>): Promise<Credential>;
  /** The merchant's answer to the paid retry, read (never believed: see Outcome). */
  read(res: ForwardResponse, credential: Credential, choice: Choice<Chosen>, a: Authorization): Promise<Outcome>;
  /** `payFirst` choices: the retry's proof of a payment the gateway's rail made. */
  paidHeaders?(paid: { txRef: string }): Record<string, string>;
}

/** What the gateway reserves for a choice. */
export interface Choice<Chosen = unknown> {
  /** Minor units of `currency` (for a hold, PROTOCOL.md §15, the maximum). */
  amount: bigint;
  currency: string;
  /** The merchant's pay-to address. */
  address: string;
  /** The receipt's `rail` when it is not the scheme's name (x402: network and asset). */
  receiptRail?: string;
  /** The gateway's own rail pays before the retry, which carries the proof (paidHeaders). */
  payFirst?: true;
  /** The scheme's own record of what it chose. */
  chosen: Chosen;
}

export interface Credential {
  /** The paid retry's headers (the exchange adds the SBA's at trust level 1). */
  headers: Record<string, string>;
  /**
   * A signed authorization the merchant can cash, whatever it answers: checked against the choice,
   * recorded and the payment `paying` before it leaves; from then on only the chain releases the
   * reservation. Absent: nothing cashable leaves (the gateway's own rail pays).
   */
  authorization?: {
    /** Read back from the signed payload (undefined: unreadable, so never sent). */
    signed: SignedAuthorization | undefined;
    chosen: ChosenAuthorization;
    /** The scheme's table and what it writes there (evm/authorizations.ts). */
    table: string;
    record: Omit<AuthorizationInput, 'paymentId' | 'payer' | 'nonce' | 'validBefore'>;
    /** The scheme's own columns of that row (x402: its version; MPP: the challenge). */
    extra: Record<string, string | number | null>;
  };
}

/**
 * The merchant's answer, read. What the scheme reports is what the chain shows (evm/settled.ts),
 * never the merchant's figure; `record` is what is written of a signed authorization.
 */
export type Outcome =
  /** Money moved, named by `tx`; `captured`: the part of a hold that moved. Committed. */
  | { kind: 'paid'; tx: string; captured?: bigint; disagreement?: ChainDisagreement }
  /** The gateway's rail pays `amount` of the hold now (0: nothing; the rest released). */
  | { kind: 'capture'; amount: bigint }
  /** Nothing provably moved: the reservation is held and the agent told `why`. */
  | { kind: 'held'; why: string; record: Recorded; disagreement?: ChainDisagreement }
  /** Served without a settlement the chain shows: the agent gets the answer, the reservation held. */
  | { kind: 'served'; record: Recorded; disagreement?: ChainDisagreement };

export type Recorded = { outcome: string; tx?: string; settled?: bigint };

/** What the schemes are made from (app.ts): one set of settings, each scheme reads its own. */
export interface SchemeDeps {
  db: SqlDatabase;
  now: () => number;
  /** The gateway's own rail (the ledger by default): what X-Payment terms are paid on. */
  railName: string;
  /** The gateway's EVM account (`CTL_GATEWAY_EVM_PRIVATE_KEY`) and what it may pay with. */
  evm: {
    account: PrivateKeyAccount;
    /** `CTL_X402_ASSETS`: the assets a session currency may be paid in. */
    assets: X402AssetMap;
    /** The longest validity signed (evm/assets.ts holdCap). */
    maxTimeoutSeconds: number;
    /** `CTL_X402_RPC_URL`'s readers. */
    chain?: (network: string) => EvmChainReader | undefined;
    /** Clock skew allowed past `validBefore` before the chain is asked (evm/chain.ts). */
    expiryMarginMs?: number;
  };
}

/** A scheme's folder, as payments/registry.ts lists it. */
export interface SchemeModule {
  /** The scheme's name; the rail's too, when it has a settling half (`rail`). */
  readonly name: string;
  create(deps: SchemeDeps): PaymentScheme;
  /** The settling half reconcile asks; absent when the scheme pays on the gateway's own rail. */
  rail?(deps: SchemeDeps): Rail;
  /** Its tables (run by server.ts, never by createGatewayApp). */
  readonly migrations?: readonly Migration[];
}

/** What routes/proxy.ts runs for a 402: the first protocol that detects it pays it. */
export interface PaymentProtocol<Terms = unknown> {
  readonly name: string;
  detect(res: MerchantAnswer): Terms | undefined;
  pay(terms: Terms, exchange: PaidExchangeContext): Promise<PaidExchange>;
}

export interface PaidExchangeContext {
  /** The session paying. */
  session: SessionRecord;
  /** The merchant host (what merchant globs and receipts name). */
  host: string;
  purpose: string | undefined;
  /** Sends the agent's request again to the URL that asked for payment, with these headers added. */
  retry(headers: Record<string, string>): Promise<ForwardResponse>;
}

export interface PaidExchange {
  response: ForwardResponse;
  /** Set when the payment is committed with a signed receipt. */
  receiptId?: string;
}
