/**
 * The x402 protocol: the gateway pays merchants built with the official x402 packages, v2
 * and v1, with the official client (`@x402/core` + the `exact` EVM scheme of `@x402/evm`) and a
 * viem local account. The money moves when the merchant's facilitator settles the signed
 * EIP-3009 authorization, so the order of things is what keeps the budget:
 *
 *   1. the 402 is read and its requirements normalised (payments/schemes/x402/terms.ts), the terms policy picks one
 *      (asset map, validity, scheme) — nothing reserved, nothing signed;
 *   2. inside the client's `onBeforePaymentCreation` hook, the session's checks and the atomic
 *      reservation run (payments/service.ts authorize); a refusal aborts the hook, so no
 *      signature and no header ever exist;
 *   3. the signed authorization is recorded (payments/schemes/x402/store.ts) and the payment marked `paying` before the
 *      header leaves; the retry carries `PAYMENT-SIGNATURE` (v2) or `X-PAYMENT` (v1);
 *   4. `PAYMENT-RESPONSE` / `X-PAYMENT-RESPONSE` with a transaction commits the spend and a receipt
 *      `txRef: txid:<transaction>`. A signed authorization can be cashed until it expires,
 *      whatever the merchant says, so once the header has left the reservation is released only
 *      when the payment is provably dead: after `validBefore` (+ margin) a chain read says the
 *      nonce is unused (reconcile). A refusal (402 again, a settlement failure with no
 *      transaction) is recorded, not believed: the reservation stays.
 *
 * x402 v2 `upto` (PROTOCOL.md §15) follows the same order with the stock `upto` client scheme: the
 * terms' `amount` is a maximum, reserved whole in step 2 (a hold); the gateway signs a Permit2
 * witness transfer for it (the payer must have approved Permit2 once: a merchant's 412
 * `permit2_allowance_required` says it has not); a PAYMENT-RESPONSE settlement is committed at what
 * the chain shows moved (the whole hold without a reader; never the merchant's `amount`), the rest
 * released, the receipt showing both (payments/evm/settled.ts). A 0 settle
 * or a failed handler leaves the permit cashable by the named facilitator until its deadline:
 * held, then settled by reconcile from Permit2's nonce bitmap and the proxy's settle calldata.
 */
import { x402Client } from '@x402/core/client';
import { x402HTTPClient, decodePaymentResponseHeader } from '@x402/core/http';
import type {
  PaymentPayload,
  PaymentPayloadV1,
  PaymentRequirements,
  PaymentRequirementsV1,
  SettleResponse,
} from '@x402/core/types';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { UptoEvmScheme } from '@x402/evm/upto/client';
import { privateKeyToAccount } from 'viem/accounts';
import { CtlError } from '../../../../src/index.js';
import { HttpError, type SqlDatabase } from '../../../../service-kit/index.js';
import type { ForwardResponse } from '../../../net/forwarder.js';
import type { PaymentService, Authorization } from '../../service.js';
import { chooseRequirement, detectX402, type NormalisedRequirement, type X402Terms } from './terms.js';
import { DEFAULT_MAX_HOLD_SECONDS, networksOf, type X402AssetMap } from '../../evm/assets.js';
import { X402_RAIL, receiptRail } from './rail.js';
import type { EvmChainReader } from '../../evm/chain.js';
import { PERMIT2_ADDRESS, UPTO_PROXY_ADDRESS, permit2Allowance } from '../../evm/permit2.js';
import { insertX402, recordOutcome } from './store.js';
import { eip3009Check, uptoCapture, type ChainDisagreement, type UptoCapture } from '../../evm/settled.js';
import type { SessionRecord } from '../../../sessions/store.js';
import { sbaHeaders, type PaymentProtocol } from '../scheme.js';

export interface X402ProtocolOptions {
  db: SqlDatabase;
  payments: PaymentService;
  /** `CTL_GATEWAY_EVM_PRIVATE_KEY`: the account that signs EIP-3009 authorizations. */
  privateKey: `0x${string}`;
  /** `CTL_X402_ASSETS`. */
  assets: X402AssetMap;
  /** `CTL_X402_MAX_TIMEOUT_SECONDS`. */
  maxTimeoutSeconds: number;
  /** `CTL_X402_MAX_HOLD_SECONDS` (default 600): the longest one payment may hold its amount of a budget (holdCap). */
  maxHoldSeconds?: number;
  /**
   * How long after `validBefore` reconcile may take to settle a sent authorization: the expiry margin, its staleness
   * and its interval.
   */
  settleDelayMs?: number;
  /** `CTL_X402_RPC_URL`: with a reader, an `upto` payer's Permit2 allowance is checked before anything is reserved. */
  chain?: (network: string) => EvmChainReader | undefined;
  now: () => number;
}

/**
 * The longest validity the gateway signs for. A sent authorization holds its amount of the
 * session's budget until reconcile settles it: up to its validity + `settleDelayMs` (the expiry
 * margin, then a reconcile pass once the row is stale). A merchant's terms may hold at most
 * `maxHoldSeconds` of a budget per request, so the validity is capped at that minus the delay,
 * and at `maxTimeoutSeconds`; terms above the cap are `payment_terms_refused`.
 */
export function holdCap(
  o: Pick<X402ProtocolOptions, 'maxTimeoutSeconds' | 'maxHoldSeconds' | 'settleDelayMs'>,
): number {
  const hold = o.maxHoldSeconds ?? DEFAULT_MAX_HOLD_SECONDS;
  // 0 when reconcile alone takes longer than the hold: every x402 402 is then refused.
  return Math.max(0, Math.min(o.maxTimeoutSeconds, Math.floor(hold - (o.settleDelayMs ?? 0) / 1000)));
}

type Job = { run: (selected: PaymentRequirements | PaymentRequirementsV1) => Promise<void>; error?: unknown };

/** The x402 PaymentProtocol (v2 and v1). The gateway's address is `address`. */
export function createX402Protocol(o: X402ProtocolOptions): PaymentProtocol<X402Terms> & { address: `0x${string}` } {
  const account = privateKeyToAccount(o.privateKey);
  const client = new x402Client();
  // v2 for the networks of the asset map; the helper also registers v1 for the EVM networks it knows.
  const networks = networksOf(o.assets) as `${string}:${string}`[];
  registerExactEvmScheme(client, { signer: account, ...(networks.length ? { networks } : {}) });
  // x402 v2 `upto` (Permit2 witness transfers) on the same networks, with the same account.
  const upto = new UptoEvmScheme(account);
  for (const n of networks.length ? networks : (['eip155:*'] as const)) client.register(n, upto);
  // The SDK's spend controls cap in USD per payment; the gateway's policy (asset map, session
  // budget in atomic units) already ran and is the stricter one, so they would only disagree.
  client.setSpendControls(false);
  // One client serves every payment: each createPaymentPayload call finds its own job by the
  // PaymentRequired object it was given (the hook's context carries that same object).
  const jobs = new WeakMap<object, Job>();
  client.onBeforePaymentCreation(async (ctx) => {
    const job = jobs.get(ctx.paymentRequired);
    if (!job) return { abort: true, reason: 'not a payment the gateway authorized' };
    try {
      await job.run(ctx.selectedRequirements as PaymentRequirements | PaymentRequirementsV1);
    } catch (e) {
      job.error = e;
      return { abort: true, reason: (e as { code?: string }).code ?? 'refused' };
    }
  });
  const http = new x402HTTPClient(client);
  const maxTimeoutSeconds = holdCap(o);

  /**
   * `upto` needs the payer's ERC-20 allowance to Permit2 (a one-time on-chain approve). Read
   * before anything is reserved or signed when the network has a reader; without one, the
   * merchant's 412 `permit2_allowance_required` says so after the permit was sent.
   */
  async function checkPermit2Allowance(network: string, asset: string, max: bigint): Promise<void> {
    const reader = o.chain?.(network);
    if (!reader) return;
    const allowance = await permit2Allowance(reader, asset, account.address).catch(() => undefined);
    if (allowance !== undefined && allowance < max)
      throw new HttpError(502, 'payment_failed', permit2Missing(asset, 'nothing was reserved or signed'));
  }

  const permit2Missing = (asset: string, then: string) =>
    `x402 upto: the gateway's account ${account.address} has not approved Permit2 (${PERMIT2_ADDRESS}) for ` +
    `${asset}: send approve(Permit2, amount) from it once (CTL_GATEWAY_EVM_PRIVATE_KEY's account); ${then}`;

  /**
   * The paid retry's answer to an `upto` permit: what to capture when the merchant reports a
   * settlement with a transaction — what the chain shows moved (payments/evm/settled.ts), or the
   * whole hold without a reader, never the merchant's `amount` — with the report's disagreement
   * with the chain; undefined when the agent gets the merchant's answer with the hold kept (a
   * 0 settle: the permit stays cashable until its deadline, quirk 1 of the integration; a report
   * the chain does not show yet); throws `payment_unconfirmed` (held) otherwise.
   */
  /** The chain's head on `network` (undefined without a reader that numbers blocks, or when it fails). */
  async function headBlock(network: string): Promise<bigint | undefined> {
    const reader = o.chain?.(network);
    return reader?.getBlockNumber ? reader.getBlockNumber({ cacheTime: 0 }).catch(() => undefined) : undefined;
  }

  async function settleHold(
    settle: SettleResponse | undefined,
    res: ForwardResponse,
    auth: Authorization,
    chosen: NormalisedRequirement,
    signed: SignedAuthorization,
    held: string,
    session: SessionRecord,
    fromBlock: bigint | undefined,
  ): Promise<(UptoCapture & { captured: bigint }) | undefined> {
    const amount = settle?.amount;
    const atomic = typeof amount === 'string' && /^(0|[1-9][0-9]{0,77})$/.test(amount) ? BigInt(amount) : undefined;
    if (settle?.success === true && isTransaction(settle.transaction)) {
      // No `amount`: a facilitator that settles the whole permit. Only the report names it.
      const reported = amount === undefined ? auth.amount : atomic;
      const c = await uptoCapture(o.chain?.(chosen.network), {
        hold: auth.amount,
        owner: signed.from,
        nonce: BigInt(signed.nonce),
        token: chosen.asset,
        reportedTx: settle.transaction,
        ...(reported !== undefined ? { reportedAmount: reported } : {}),
        ...(fromBlock !== undefined ? { fromBlock } : {}),
      });
      if (c.disagreement) await o.payments.settlementMismatch(session, mismatchOf(auth, chosen, c.disagreement));
      if (c.captured !== undefined) {
        await recordOutcome(o.db, auth.paymentId, 'paid', c.tx, c.captured);
        return c;
      }
      // Not on the chain (yet): the merchant's word alone moves nothing; reconcile asks again.
      await recordOutcome(o.db, auth.paymentId, 'pending', settle.transaction);
      if (res.status >= 200 && res.status < 300) return undefined;
      throw new HttpError(502, 'payment_unconfirmed', `the chain does not show the settlement yet; ${held}`);
    }
    if (settle?.success === true && atomic === 0n && !settle.transaction) {
      await recordOutcome(o.db, auth.paymentId, 'zero', undefined, 0n);
      if (res.status >= 200 && res.status < 300) return undefined;
    }
    if (res.status === 412 && refusalReason(res) === 'permit2_allowance_required') {
      await recordOutcome(o.db, auth.paymentId, 'refused');
      throw new HttpError(502, 'payment_unconfirmed', permit2Missing(chosen.asset, held));
    }
    if (settle?.transaction === undefined || settle.transaction === '') {
      if (settle?.success !== true || atomic !== 0n) await recordOutcome(o.db, auth.paymentId, 'unknown');
      if (res.status >= 200 && res.status < 300 && settle === undefined) return undefined;
    } else {
      await recordOutcome(o.db, auth.paymentId, 'pending', settle.transaction);
    }
    const why = settle?.errorReason ?? (settle ? 'no settled amount' : `HTTP ${res.status}, no settlement`);
    throw new HttpError(
      502,
      'payment_unconfirmed',
      `the merchant's facilitator did not settle the permit (${why}); ${held}`,
    );
  }

  return {
    name: X402_RAIL,
    address: account.address,
    detect: detectX402,

    async pay(terms, x) {
      const started = performance.now();
      const chosen = chooseRequirement(terms, { currency: x.session.currency, assets: o.assets, maxTimeoutSeconds });
      const hold = chosen.scheme === 'upto';
      if (hold) await checkPermit2Allowance(chosen.network, chosen.asset, chosen.amount);
      // The client sees only the requirement the policy chose: its own selection cannot drift.
      const paymentRequired = { ...terms.paymentRequired, accepts: [chosen.raw] } as Parameters<
        typeof client.createPaymentPayload
      >[0];
      let auth: Authorization | undefined;
      const job: Job = {
        run: async (selected) => {
          if (selected !== chosen.raw)
            throw new CtlError(
              'payment_terms_refused',
              'the x402 client selected a requirement the gateway did not choose',
            );
          // the session's checks and the reservation, before any signature exists.
          auth = await o.payments.authorize(
            x.session,
            { amount: chosen.amount, currency: x.session.currency, address: chosen.payTo },
            x.host,
            x.purpose,
            X402_RAIL,
          );
        },
      };
      jobs.set(paymentRequired, job);

      let payload: PaymentPayload | PaymentPayloadV1;
      try {
        payload = await client.createPaymentPayload(paymentRequired);
      } catch (e) {
        if (job.error) throw job.error; // the refusal, with its own code; nothing was reserved
        // Reserved but the scheme failed to sign: nothing left the gateway, the payment is dead.
        if (auth) await o.payments.abandon(auth.paymentId, X402_RAIL);
        throw new CtlError(
          'payment_terms_refused',
          `x402: the payment could not be signed: ${(e as Error)?.message ?? 'error'}`,
        );
      }
      if (!auth) throw new Error("x402: a payload was created without the gateway's authorization hook");

      const signed = hold ? signedPermit(payload, chosen) : signedAuthorization(payload);
      // The validity signed is the one the policy capped (a client that chose a longer one is refused; 5 s for the
      // clock read).
      const tooLong =
        signed !== undefined && Number(signed.validBefore) * 1000 > o.now() + (chosen.maxTimeoutSeconds + 5) * 1000;
      if (
        !signed ||
        tooLong ||
        signed.to.toLowerCase() !== chosen.payTo ||
        BigInt(signed.value) !== chosen.amount ||
        signed.from.toLowerCase() !== account.address.toLowerCase()
      ) {
        await o.payments.abandon(auth.paymentId, X402_RAIL);
        throw new CtlError('payment_terms_refused', 'x402: the signed authorization does not match the chosen terms');
      }
      const validBefore = Number(signed.validBefore) * 1000;
      // `upto`: the head now, before the permit leaves: no settle of it can be in an older block,
      // so the search for its settle starts here (evm/permit2.ts uptoSettlement).
      const fromBlock = hold ? await headBlock(chosen.network) : undefined;
      // Recorded, then `paying`, then sent: reconcile() always knows of a signature that is out.
      await insertX402(
        o.db,
        {
          paymentId: auth.paymentId,
          version: terms.version,
          network: chosen.network,
          asset: chosen.asset,
          payTo: chosen.payTo,
          payer: signed.from.toLowerCase(),
          nonce: signed.nonce,
          validBefore,
          ...(hold ? { scheme: 'upto' } : {}),
          ...(fromBlock !== undefined ? { fromBlock } : {}),
        },
        o.now(),
      );
      if (!(await o.payments.markPaying(auth))) {
        throw new HttpError(409, 'conflict', 'the payment was settled by reconciliation before it was sent');
      }

      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(http.encodePaymentSignatureHeader(payload as PaymentPayload)))
        headers[k.toLowerCase()] = v;
      Object.assign(headers, sbaHeaders(x.session, auth.sba));
      const held = `its reservation is held until the authorization expires (${new Date(validBefore).toISOString()})`;

      let res: ForwardResponse;
      try {
        res = await x.retry(headers);
      } catch (e) {
        await recordOutcome(o.db, auth.paymentId, 'unknown');
        const status = e instanceof HttpError ? e.status : 502;
        throw new HttpError(
          status,
          'payment_unconfirmed',
          `the merchant did not answer the paid retry (${(e as Error)?.message ?? 'error'}); ${held}`,
        );
      }

      const settle = settlement(res);
      if (hold) {
        const c = await settleHold(settle, res, auth, chosen, signed, held, x.session, fromBlock);
        if (c === undefined) return { response: res };
        const { receipt } = await o.payments.complete(
          x.session,
          auth,
          `txid:${c.tx}`,
          receiptRail(chosen),
          started,
          c.captured,
        );
        return { response: res, receiptId: String(receipt.receiptId) };
      }
      if (settle?.success === true && isTransaction(settle.transaction)) {
        // Only the signed value can move, so it is committed; the chain checks the merchant's claim.
        const check = await eip3009Check(o.chain?.(chosen.network), {
          asset: chosen.asset,
          payer: signed.from,
          nonce: signed.nonce,
          value: auth.amount,
          reportedTx: settle.transaction,
        });
        if (check.disagreement)
          await o.payments.settlementMismatch(x.session, mismatchOf(auth, chosen, check.disagreement));
        const tx = check.tx ?? `${chosen.network}/${chosen.asset}/${signed.nonce}`;
        await recordOutcome(o.db, auth.paymentId, 'paid', tx);
        const { receipt } = await o.payments.complete(x.session, auth, `txid:${tx}`, receiptRail(chosen), started);
        return { response: res, receiptId: String(receipt.receiptId) };
      }
      if (settle && settle.success !== true && !settle.transaction) {
        // A settlement failure with no transaction is only the merchant's word: it holds the
        // signed authorization and can still cash it until `validBefore`. Held; reconcile decides.
        await recordOutcome(o.db, auth.paymentId, 'refused');
        throw new HttpError(
          502,
          'payment_unconfirmed',
          `the merchant's facilitator did not settle the payment (${settle.errorReason ?? 'no reason given'}); ${held}`,
        );
      }
      if (settle && isTransaction(settle.transaction)) {
        await recordOutcome(o.db, auth.paymentId, 'pending', settle.transaction);
        throw new HttpError(
          502,
          'payment_unconfirmed',
          `settlement of transaction ${settle.transaction} is not confirmed (${settle.errorReason ?? 'pending'}); ` +
            'the reservation is held',
        );
      }
      if (res.status === 402) {
        // The merchant asks again instead of serving: it may still have cashed (or cash later)
        // the authorization it was sent, so this is no proof of death. Held; reconcile decides.
        await recordOutcome(o.db, auth.paymentId, 'refused');
        throw new HttpError(
          502,
          'payment_unconfirmed',
          `the merchant refused the payment (${refusalReason(res)}); ${held}`,
        );
      }
      await recordOutcome(o.db, auth.paymentId, 'unknown');
      // Served without a settlement answer: the agent gets what it paid for, the money stays reserved.
      if (res.status >= 200 && res.status < 300) return { response: res };
      throw new HttpError(
        502,
        'payment_unconfirmed',
        `the merchant answered the paid retry with HTTP ${res.status} and no settlement; ${held}`,
      );
    },
  };
}

/** The `payment.settlement_mismatch` event of a payment whose merchant's report the chain contradicts. */
function mismatchOf(auth: Authorization, chosen: NormalisedRequirement, d: ChainDisagreement) {
  return {
    paymentId: auth.paymentId,
    merchant: auth.merchant,
    payTo: chosen.payTo,
    rail: receiptRail(chosen),
    authorizedAmountMinor: auth.amount.toString(),
    ...d,
  };
}

interface SignedAuthorization {
  from: string;
  to: string;
  value: string;
  validAfter: string;
  validBefore: string;
  nonce: string;
}

/**
 * The `upto` Permit2 witness transfer inside a v2 payload, in the EIP-3009 shape the checks above
 * read (`to`, `value` the maximum, `validBefore` the deadline, `nonce` a decimal uint256), once its
 * own members match the chosen terms: the token, the upto proxy as spender, the facilitator named.
 */
function signedPermit(
  p: PaymentPayload | PaymentPayloadV1,
  chosen: NormalisedRequirement,
): SignedAuthorization | undefined {
  const a = (p.payload as { permit2Authorization?: any } | undefined)?.permit2Authorization;
  const dec = (v: unknown) => typeof v === 'string' && /^[0-9]{1,78}$/.test(v);
  if (!a || typeof a !== 'object' || typeof a.from !== 'string' || !dec(a.nonce) || !dec(a.deadline)) return undefined;
  if (!a.permitted || !dec(a.permitted.amount) || typeof a.permitted.token !== 'string') return undefined;
  if (!a.witness || typeof a.witness.to !== 'string' || typeof a.witness.facilitator !== 'string') return undefined;
  if (
    a.permitted.token.toLowerCase() !== chosen.asset ||
    String(a.spender).toLowerCase() !== UPTO_PROXY_ADDRESS.toLowerCase() ||
    a.witness.facilitator.toLowerCase() !== chosen.facilitator ||
    a.deadline.length > 20
  )
    return undefined;
  return {
    from: a.from,
    to: a.witness.to,
    value: a.permitted.amount,
    validAfter: String(a.witness.validAfter),
    validBefore: a.deadline,
    nonce: a.nonce,
  };
}

/** The EIP-3009 authorization inside a v2 or v1 payload (same place in both). */
function signedAuthorization(p: PaymentPayload | PaymentPayloadV1): SignedAuthorization | undefined {
  const a = (p.payload as { authorization?: Record<string, unknown> } | undefined)?.authorization;
  if (!a) return undefined;
  for (const k of ['from', 'to', 'value', 'validAfter', 'validBefore', 'nonce'])
    if (typeof a[k] !== 'string') return undefined;
  if (!/^[0-9]{1,20}$/.test(a.validBefore as string) || !/^[0-9]{1,78}$/.test(a.value as string)) return undefined;
  return a as unknown as SignedAuthorization;
}

function settlement(res: ForwardResponse): SettleResponse | undefined {
  for (const name of ['payment-response', 'x-payment-response']) {
    const v = res.headers[name];
    if (typeof v !== 'string' || v.length > 16 * 1024) continue;
    try {
      const s = decodePaymentResponseHeader(v) as SettleResponse;
      if (typeof s === 'object' && s !== null) return s;
    } catch {
      // unreadable: treated as absent
    }
  }
  return undefined;
}

const isTransaction = (t: unknown): t is string => typeof t === 'string' && /^[\x21-\x7e]{1,250}$/.test(t);

function refusalReason(res: ForwardResponse): string {
  const h = res.headers['payment-required'];
  if (typeof h === 'string') {
    try {
      const pr = JSON.parse(Buffer.from(h, 'base64').toString('utf8')) as { error?: unknown };
      if (typeof pr.error === 'string') return pr.error.slice(0, 200);
    } catch {
      // fall through to the body
    }
  }
  try {
    const b = JSON.parse(res.body.toString('utf8')) as { error?: unknown };
    if (typeof b.error === 'string') return b.error.slice(0, 200);
  } catch {
    // not JSON
  }
  return 'HTTP 402';
}
