/**
 * The MPP scheme: the gateway pays merchants that speak the Machine Payments Protocol (the
 * `Payment` HTTP authentication scheme) as the stock `mppx` server issues it, for the `evm`
 * method's `charge` intent, with mppx's own client and the gateway's viem account (the account
 * and assets of x402: an `evm` charge is an EIP-3009 authorization, like x402's `exact`). The
 * order that keeps the budget is the exchange's (payments/exchange.ts). Here:
 *
 *   - choose: the challenges read with mppx's parser and the terms policy picks one (terms.ts);
 *   - sign: the stock client prepares that challenge without signing (`preparePayment`), then the
 *     reservation runs, then the client signs the credential, sent in `Authorization: Payment`;
 *   - read: a `Payment-Receipt` naming a transaction is paid (checked on the chain); anything else
 *     (a 402 again, no receipt) is only the merchant's word: held until `validBefore` (the
 *     challenge's `expires`), then reconciled from the chain.
 */
// mppx is loaded on the first MPP 402 (a second of CPU at import): a gateway that never meets
// one never pays for it. Types only here; the code comes through `load()`.
import { CtlError } from '../../../../src/index.js';
import { eip3009Paid } from '../../evm/authorizations.js';
import { authorizationRail, createAuthorizationRail } from '../../evm/rail.js';
import type { PaymentScheme, SchemeDeps, SchemeModule } from '../scheme.js';
import * as terms from './terms.js';
import type { MppCharge } from './terms.js';
import { MPP_MIGRATIONS, MPP_TABLE, mppColumns } from './store.js';
import { hasPaymentScheme, paymentReceipt, problem, signedAuthorization } from './payload.js';

export const MPP_RAIL = 'mpp';

/** A 402 with a `Payment` challenge in `WWW-Authenticate`, read in full (terms.ts) when paid. */
export interface MppOffer {
  res: { status: number; headers: import('node:http').IncomingHttpHeaders; body: Buffer };
}

function createMppScheme(d: SchemeDeps): PaymentScheme<MppOffer, MppCharge> {
  const { account, assets, maxTimeoutSeconds } = d.evm;
  let loading: ReturnType<typeof load> | undefined;
  async function load() {
    const [, mppx, client] = await Promise.all([terms.loadMpp(), import('mppx'), import('mppx/client')]);
    const known = terms.signableAssets(assets);
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
  const loaded = () => {
    if (!loading) {
      loading = load();
      loading.catch(() => (loading = undefined));
    }
    return loading;
  };

  return {
    name: MPP_RAIL,
    title: 'MPP',
    detect: (res) => (res.status === 402 && hasPaymentScheme(res.headers) ? { res } : undefined),

    async choose(offer, session) {
      await loaded();
      // Not MPP after all, or only unpayable MPP beside x402 terms: the next scheme that knows it.
      const read = terms.detectMpp(offer.res);
      if (!read) return undefined;
      const chosen = terms.chooseCharge(read, { currency: session.currency, assets, maxTimeoutSeconds, now: d.now() });
      return {
        amount: chosen.amount,
        currency: session.currency,
        address: chosen.payTo,
        receiptRail: authorizationRail(MPP_RAIL, chosen),
        chosen,
      };
    },

    async sign(c, authorize) {
      const { mppx, client } = await loaded();
      const chosen = c.chosen;
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
      await authorize(); // the session's checks and the reservation, before any credential exists
      let credential: string;
      try {
        credential = await prepared.createCredential();
      } catch (e) {
        throw new CtlError(
          'payment_terms_refused',
          `MPP: the credential could not be signed: ${(e as Error)?.message}`,
        );
      }
      // The stock client attaches the credential where the challenge asked (Authorization by default).
      const headers: Record<string, string> = {};
      const init = prepared.setCredential({ headers: {} }, credential) as RequestInit;
      new Headers(init.headers).forEach((v, k) => (headers[k.toLowerCase()] = v));
      return {
        headers,
        authorization: {
          signed: signedAuthorization(mppx.Credential, credential),
          chosen: {
            payTo: chosen.payTo,
            amount: chosen.amount,
            payer: account.address,
            latestValidBefore: chosen.expiresAt! + 1000,
          },
          table: MPP_TABLE,
          record: { network: chosen.network, asset: chosen.asset, payTo: chosen.payTo },
          extra: mppColumns({
            challengeId: chosen.challenge.id,
            realm: chosen.challenge.realm,
            method: chosen.challenge.method,
          }),
        },
      };
    },

    async read(res, credential, c) {
      const { mppx } = await loaded();
      const receipt = paymentReceipt(mppx.Receipt, res);
      const signed = credential.authorization!.signed!;
      if (receipt) {
        // Only the signed value can move, so it is paid; the chain checks the merchant's claim.
        const a = { network: c.chosen.network, asset: c.chosen.asset, payer: signed.from, nonce: signed.nonce };
        return {
          kind: 'paid',
          ...(await eip3009Paid(d.evm.chain?.(a.network), { ...a, value: c.amount }, receipt.reference)),
        };
      }
      // Asked again instead of served: the merchant may still cash (or have cashed) what it was sent.
      if (res.status === 402)
        return {
          kind: 'held',
          why: `the merchant refused the payment (${problem(res)})`,
          record: { outcome: 'refused' },
        };
      // Served without a receipt: the agent gets what it paid for, the money stays reserved.
      if (res.status >= 200 && res.status < 300) return { kind: 'served', record: { outcome: 'unknown' } };
      const why = `the merchant answered the paid retry with HTTP ${res.status} and no Payment-Receipt`;
      return { kind: 'held', why, record: { outcome: 'unknown' } };
    },
  };
}

/** The MPP scheme, as payments/registry.ts lists it. */
export const mppScheme: SchemeModule = {
  name: MPP_RAIL,
  create: createMppScheme,
  // MPP's `evm` charge is an EIP-3009 authorization: settled as x402's `exact` (evm/rail.ts).
  rail: (d) =>
    createAuthorizationRail({
      name: MPP_RAIL,
      table: MPP_TABLE,
      db: d.db,
      now: d.now,
      chain: d.evm.chain,
      expiryMarginMs: d.evm.expiryMarginMs,
    }),
  migrations: MPP_MIGRATIONS,
};
