/**
 * The MPP rail: the gateway pays merchants that speak the Machine Payments Protocol (the
 * `Payment` HTTP authentication scheme) as the stock `mppx` server issues it, for the `evm`
 * method's `charge` intent, with mppx's own client and a viem local account (the same account
 * and assets as x402: an `evm` charge is an EIP-3009 authorization, like x402's `exact`). The
 * money moves when the merchant settles the authorization, so the order is x402's:
 *
 *   1. the challenges are read with mppx's parser and the terms policy picks one (terms.ts) —
 *      nothing reserved, nothing signed;
 *   2. the stock client prepares that challenge without signing (`preparePayment`); the session's
 *      checks and the atomic reservation run (payments/service.ts authorize); a refusal ends
 *      here, so no credential ever exists;
 *   3. the client signs the credential, the gateway checks it against the chosen terms, records
 *      it (store.ts) and marks the payment `paying` before it leaves in `Authorization: Payment`;
 *   4. a `Payment-Receipt` naming a transaction commits the spend and a receipt `txid:<transaction>`.
 *      Anything else (a 402 again, no answer, no receipt) is only the merchant's word: the
 *      authorization stays cashable until `validBefore` (the challenge's `expires`), so the
 *      reservation is held and reconcile settles it after expiry by reading the chain.
 */
// mppx is loaded on the first MPP 402 (a second of CPU at import): a gateway that never meets
// one never pays for it. Types only here; the code comes through `load()`.
import type { Receipt } from 'mppx';
import type { IncomingHttpHeaders } from 'node:http';
import { privateKeyToAccount } from 'viem/accounts';
import { CtlError } from '../../../../src/index.js';
import { HttpError, type SqlDatabase } from '../../../../service-kit/index.js';
import type { Authorization, PaymentService } from '../../service.js';
import type { ForwardResponse } from '../../../net/forwarder.js';
import { RailError, type Rail } from '../../rail.js';
import { sbaHeaders, type PaymentProtocol } from '../scheme.js';
import type { X402AssetMap } from '../../evm/assets.js';
import { DEFAULT_EXPIRY_MARGIN_MS, type EvmChainReader } from '../../evm/chain.js';
import * as terms from './terms.js';
import type { MppCharge } from './terms.js';
import { insertMpp, mppById, recordMppOutcome } from './store.js';
import { eip3009Check } from '../../evm/settled.js';

export const MPP_RAIL = 'mpp';

const AUTHORIZATION_STATE_ABI = [
  {
    type: 'function',
    name: 'authorizationState',
    stateMutability: 'view',
    inputs: [
      { name: 'authorizer', type: 'address' },
      { name: 'nonce', type: 'bytes32' },
    ],
    outputs: [{ name: '', type: 'bool' }],
  },
] as const;

/**
 * The receipt's `rail`: mpp, network and asset, as x402's (the method is always `evm`, and a
 * receipt's rail is at most 64 characters).
 */
export function mppReceiptRail(c: Pick<MppCharge, 'network' | 'asset'>): string {
  return `${MPP_RAIL}:${c.network}:${c.asset}`;
}

/**
 * The settling half (payments/reconcile.ts), as for x402: a payment whose credential
 * was never recorded was never sent (void); one the merchant's `Payment-Receipt` named a
 * transaction for is paid; any other is alive until `validBefore` + margin, then EIP-3009
 * `authorizationState` on the chain reader decides (unused: released; used: committed). With no
 * reader for the network it is counted spent, the side that never overspends.
 */
export function createMppRail(
  db: SqlDatabase,
  now: () => number,
  chain?: (network: string) => EvmChainReader | undefined,
  expiryMarginMs = DEFAULT_EXPIRY_MARGIN_MS,
): Rail {
  return {
    name: MPP_RAIL,
    async pay() {
      throw new RailError('MPP payments are settled by the merchant on the paid retry');
    },
    async outcome(paymentId) {
      const r = await mppById(db, paymentId);
      if (!r) return undefined;
      const rail = mppReceiptRail(r);
      if (r.outcome === 'paid' && r.tx) return { txRef: `txid:${r.tx}`, rail };
      if (now() < r.validBefore + expiryMarginMs) return 'pending';
      const txRef = r.tx ? `txid:${r.tx}` : `txid:${r.network}/${r.asset}/${r.nonce}`;
      const reader = chain?.(r.network);
      if (!reader) {
        await recordMppOutcome(db, paymentId, 'expired-unverified');
        return { txRef, rail };
      }
      const used = await reader.readContract({
        address: r.asset as `0x${string}`,
        abi: AUTHORIZATION_STATE_ABI,
        functionName: 'authorizationState',
        args: [r.payer, r.nonce],
      });
      if (used === false) return undefined;
      if (used !== true) throw new Error(`mpp: authorizationState answered ${String(used)}`);
      await recordMppOutcome(db, paymentId, 'paid');
      return { txRef, rail };
    },
  };
}

export interface MppProtocolOptions {
  db: SqlDatabase;
  payments: PaymentService;
  /** `CTL_GATEWAY_EVM_PRIVATE_KEY`: the account that signs EIP-3009 authorizations (x402's). */
  privateKey: `0x${string}`;
  /** `CTL_X402_ASSETS`: the assets an `evm` charge may be paid in, per session currency. */
  assets: X402AssetMap;
  /** The longest validity signed (x402's holdCap: `CTL_X402_MAX_TIMEOUT_SECONDS`, `CTL_X402_MAX_HOLD_SECONDS`). */
  maxTimeoutSeconds: number;
  now: () => number;
  /** `CTL_X402_RPC_URL`: with a reader, a merchant's `Payment-Receipt` is checked against the chain (x402's reader). */
  chain?: (network: string) => EvmChainReader | undefined;
  /**
   * The protocols after this one, for a 402 that only looked like MPP (a `Payment` token inside
   * another scheme's value) or whose MPP challenges are all unpayable beside x402 terms.
   */
  fallback?: PaymentProtocol[];
}

/** A 402 with a `Payment` challenge in `WWW-Authenticate`, read in full (terms.ts) when paid. */
export interface MppOffer {
  res: ForwardResponse;
}

/** Cheap and synchronous: does the 402 name the `Payment` scheme at all? */
export function hasPaymentScheme(headers: IncomingHttpHeaders): boolean {
  const raw = headers['www-authenticate'];
  const h = Array.isArray(raw) ? raw.join(', ') : raw;
  return h !== undefined && /(^|,)\s*payment\s/i.test(h);
}

interface SignedAuthorization {
  from: string;
  to: string;
  value: string;
  validBefore: string;
  nonce: string;
}

/** The MPP PaymentProtocol (`evm` `charge`). */
export function createMppProtocol(o: MppProtocolOptions): PaymentProtocol<MppOffer> {
  const account = privateKeyToAccount(o.privateKey);
  let loaded: ReturnType<typeof load> | undefined;
  async function load() {
    const [, mppx, client] = await Promise.all([terms.loadMpp(), import('mppx'), import('mppx/client')]);
    const known = terms.signableAssets(o.assets);
    const chainIds = [...new Set(known.map((a) => Number(a.network.slice('eip155:'.length))))];
    // The stock client, limited to the mapped tokens whose EIP-712 domain it knows. It never
    // fetches anything itself: the gateway's forwarder (address guard, timeouts) carries every request.
    const mppClient = client.Mppx.create({
      methods: [client.evm.charge({ account, currencies: known, networks: chainIds })],
      polyfill: false,
      fetch: async () => {
        throw new Error('the MPP client does not send requests');
      },
    });
    return { mppx, client: mppClient };
  }

  return {
    name: MPP_RAIL,
    detect: (res) =>
      res.status === 402 && hasPaymentScheme(res.headers) ? { res: res as ForwardResponse } : undefined,

    async pay(offer, x) {
      const started = performance.now();
      if (!loaded) {
        loaded = load();
        loaded.catch(() => (loaded = undefined));
      }
      const { mppx, client } = await loaded;
      const read = terms.detectMpp(offer.res);
      if (!read) {
        // Not MPP after all, or only unpayable MPP beside x402 terms: the next protocol that knows it.
        for (const d of o.fallback ?? []) {
          const other = d.detect(offer.res);
          if (other !== undefined) return d.pay(other, x);
        }
        return { response: offer.res }; // an unknown 402 passes through, as routes/proxy.ts does
      }
      const chosen = terms.chooseCharge(read, {
        currency: x.session.currency,
        assets: o.assets,
        maxTimeoutSeconds: o.maxTimeoutSeconds,
        now: o.now(),
      });
      // The client sees only the challenge the policy chose: its own selection cannot drift.
      const only = new Response(null, {
        status: 402,
        headers: { 'www-authenticate': mppx.Challenge.serialize(chosen.challenge) },
      });
      let prepared: Awaited<ReturnType<typeof client.preparePayment>>;
      try {
        prepared = await client.preparePayment(only);
      } catch (e) {
        throw new CtlError('payment_terms_refused', `MPP: the challenge cannot be paid: ${(e as Error)?.message}`);
      }
      if (prepared.challenge.id !== chosen.challenge.id)
        throw new CtlError('payment_terms_refused', 'MPP: the client selected a challenge the gateway did not choose');

      // The session's checks and the reservation, before any credential exists.
      const auth = await o.payments.authorize(
        x.session,
        { amount: chosen.amount, currency: x.session.currency, address: chosen.payTo },
        x.host,
        x.purpose,
        MPP_RAIL,
      );

      let credential: string;
      try {
        credential = await prepared.createCredential();
      } catch (e) {
        // Reserved but not signed: nothing left the gateway, the payment is dead.
        await o.payments.abandon(auth.paymentId, MPP_RAIL);
        throw new CtlError(
          'payment_terms_refused',
          `MPP: the credential could not be signed: ${(e as Error)?.message}`,
        );
      }
      const signed = signedAuthorization(mppx.Credential, credential);
      const tooLong = signed !== undefined && Number(signed.validBefore) * 1000 > chosen.expiresAt! + 1000;
      if (
        !signed ||
        tooLong ||
        signed.to.toLowerCase() !== chosen.payTo ||
        BigInt(signed.value) !== chosen.amount ||
        signed.from.toLowerCase() !== account.address.toLowerCase()
      ) {
        await o.payments.abandon(auth.paymentId, MPP_RAIL);
        throw new CtlError('payment_terms_refused', 'MPP: the signed credential does not match the chosen terms');
      }
      const validBefore = Number(signed.validBefore) * 1000;
      // Recorded, then `paying`, then sent: reconcile() always knows of a credential that is out.
      await insertMpp(
        o.db,
        {
          paymentId: auth.paymentId,
          challengeId: chosen.challenge.id,
          realm: chosen.challenge.realm,
          method: chosen.challenge.method,
          network: chosen.network,
          asset: chosen.asset,
          payTo: chosen.payTo,
          payer: signed.from.toLowerCase(),
          nonce: signed.nonce,
          validBefore,
        },
        o.now(),
      );
      if (!(await o.payments.markPaying(auth))) {
        throw new HttpError(409, 'conflict', 'the payment was settled by reconciliation before it was sent');
      }

      // The stock client attaches the credential where the challenge asked (Authorization by default).
      const headers: Record<string, string> = {};
      const init = prepared.setCredential({ headers: {} }, credential) as RequestInit;
      new Headers(init.headers).forEach((v, k) => (headers[k.toLowerCase()] = v));
      Object.assign(headers, sbaHeaders(x.session, auth.sba));
      const held = `its reservation is held until the authorization expires (${new Date(validBefore).toISOString()})`;

      let res: ForwardResponse;
      try {
        res = await x.retry(headers);
      } catch (e) {
        await recordMppOutcome(o.db, auth.paymentId, 'unknown');
        const status = e instanceof HttpError ? e.status : 502;
        throw new HttpError(
          status,
          'payment_unconfirmed',
          `the merchant did not answer the paid retry (${(e as Error)?.message ?? 'error'}); ${held}`,
        );
      }
      return answer(res, paymentReceipt(mppx.Receipt, res), chosen, auth, signed, held, started, x.session);
    },
  };

  async function answer(
    res: ForwardResponse,
    receipt: Receipt.Receipt | undefined,
    chosen: MppCharge,
    auth: Authorization,
    signed: SignedAuthorization,
    held: string,
    started: number,
    session: Parameters<PaymentProtocol['pay']>[1]['session'],
  ) {
    if (receipt) {
      // Only the signed value can move, so it is committed; the chain checks the merchant's claim
      // (payments/evm/settled.ts), and the receipt names its transaction only if the chain agrees.
      const check = await eip3009Check(o.chain?.(chosen.network), {
        asset: chosen.asset,
        payer: signed.from,
        nonce: signed.nonce,
        value: auth.amount,
        reportedTx: receipt.reference,
      });
      if (check.disagreement)
        await o.payments.settlementMismatch(session, {
          paymentId: auth.paymentId,
          merchant: auth.merchant,
          payTo: chosen.payTo,
          rail: mppReceiptRail(chosen),
          authorizedAmountMinor: auth.amount.toString(),
          ...check.disagreement,
        });
      const tx = check.tx ?? `${chosen.network}/${chosen.asset}/${signed.nonce}`;
      await recordMppOutcome(o.db, auth.paymentId, 'paid', tx);
      const { receipt: ours } = await o.payments.complete(session, auth, `txid:${tx}`, mppReceiptRail(chosen), started);
      return { response: res, receiptId: String(ours.receiptId) };
    }
    if (res.status === 402) {
      // Asked again instead of served: the merchant may still cash (or have cashed) the
      // authorization it was sent, so this is no proof of death. Held; reconcile decides.
      await recordMppOutcome(o.db, auth.paymentId, 'refused');
      throw new HttpError(502, 'payment_unconfirmed', `the merchant refused the payment (${problem(res)}); ${held}`);
    }
    await recordMppOutcome(o.db, auth.paymentId, 'unknown');
    // Served without a receipt: the agent gets what it paid for, the money stays reserved.
    if (res.status >= 200 && res.status < 300) return { response: res };
    throw new HttpError(
      502,
      'payment_unconfirmed',
      `the merchant answered the paid retry with HTTP ${res.status} and no Payment-Receipt; ${held}`,
    );
  }
}

/** The EIP-3009 authorization inside an `evm` charge credential. */
function signedAuthorization(
  Credential: typeof import('mppx').Credential,
  credential: string,
): SignedAuthorization | undefined {
  let p: Record<string, unknown>;
  try {
    p = Credential.deserialize(credential).payload as Record<string, unknown>;
  } catch {
    return undefined;
  }
  if (typeof p !== 'object' || p === null || p.type !== 'authorization') return undefined;
  for (const k of ['from', 'to', 'value', 'validBefore', 'nonce']) if (typeof p[k] !== 'string') return undefined;
  if (!/^[0-9]{1,20}$/.test(p.validBefore as string) || !/^[0-9]{1,78}$/.test(p.value as string)) return undefined;
  if (!/^0x[0-9a-fA-F]{64}$/.test(p.nonce as string)) return undefined;
  return p as unknown as SignedAuthorization;
}

/** A `Payment-Receipt` of a successful settlement naming a transaction, or undefined. */
function paymentReceipt(Receipt: typeof import('mppx').Receipt, res: ForwardResponse): Receipt.Receipt | undefined {
  const v = res.headers['payment-receipt'];
  if (typeof v !== 'string' || v.length > 16 * 1024) return undefined;
  try {
    const r = Receipt.deserialize(v);
    return r.status === 'success' && /^[\x21-\x7e]{1,250}$/.test(r.reference) ? r : undefined;
  } catch {
    return undefined;
  }
}

/** The merchant's reason, from its Problem Details body (RFC 9457), bounded. */
function problem(res: ForwardResponse): string {
  try {
    const b = JSON.parse(res.body.toString('utf8')) as { detail?: unknown; title?: unknown };
    const d = typeof b.detail === 'string' ? b.detail : typeof b.title === 'string' ? b.title : undefined;
    if (d) return d.slice(0, 200);
  } catch {
    // not JSON
  }
  return 'HTTP 402';
}
