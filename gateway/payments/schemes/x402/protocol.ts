/**
 * The x402 scheme: the gateway pays merchants built with the official x402 packages, v2 and v1,
 * with the official client (`@x402/core` + the `exact` and `upto` EVM schemes of `@x402/evm`) and
 * the gateway's viem account. The money moves when the merchant's facilitator settles what was
 * signed; the order that keeps the budget is the exchange's (payments/exchange.ts). Here:
 *
 *   - choose: the 402's requirements normalised (terms.ts), the policy picks one (asset map,
 *     validity, scheme); for `upto`, the payer's Permit2 allowance read first;
 *   - sign: the stock client signs; the reservation runs inside its `onBeforePaymentCreation`
 *     hook, so a refusal aborts the hook and no signature exists; the retry carries
 *     `PAYMENT-SIGNATURE` (v2) or `X-PAYMENT` (v1);
 *   - read: `PAYMENT-RESPONSE` / `X-PAYMENT-RESPONSE` with a transaction is paid (checked on the
 *     chain, evm/settled.ts); a refusal, a failure with no transaction or no answer is only the
 *     merchant's word: held until the authorization expires, then reconciled from the chain.
 *
 * x402 v2 `upto` (PROTOCOL.md §15) is a Permit2 witness transfer for a maximum, reserved whole (a
 * hold): a settlement is captured at what the chain shows moved (the whole hold without a reader;
 * never the merchant's `amount`). A 0 settle or a failed handler leaves the permit cashable by the
 * named facilitator until its deadline: held, then reconciled from Permit2's nonce bitmap.
 */
import { x402Client } from '@x402/core/client';
import { x402HTTPClient } from '@x402/core/http';
import type { PaymentPayload, PaymentPayloadV1, PaymentRequirements, PaymentRequirementsV1 } from '@x402/core/types';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { UptoEvmScheme } from '@x402/evm/upto/client';
import { CtlError } from '../../../../src/index.js';
import type { Authorization } from '../../service.js';
import { chooseRequirement, detectX402, type NormalisedRequirement, type X402Terms } from './terms.js';
import { networksOf } from '../../evm/assets.js';
import { authorizationRail, createAuthorizationRail } from '../../evm/rail.js';
import { X402_MIGRATIONS, X402_TABLE, x402Columns } from './store.js';
import { signedAuthorization, signedPermit } from './payload.js';
import { readSettlement } from './settlement.js';
import { createPermit2Check } from './permit2-check.js';
import type { Choice, PaymentScheme, SchemeDeps, SchemeModule } from '../scheme.js';

export const X402_RAIL = 'x402';

/** What the policy chose, with the 402's version and payload envelope. */
export interface X402Choice {
  terms: X402Terms;
  requirement: NormalisedRequirement;
}

type Job = { run: (selected: PaymentRequirements | PaymentRequirementsV1) => Promise<void>; error?: unknown };

function createX402Scheme(d: SchemeDeps): PaymentScheme<X402Terms, X402Choice> {
  const { account, assets, maxTimeoutSeconds } = d.evm;
  const client = new x402Client();
  // v2 for the networks of the asset map; the helper also registers v1 for the EVM networks it knows.
  const networks = networksOf(assets) as `${string}:${string}`[];
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
  const permit2 = createPermit2Check(d.evm);

  /** The stock client signs the one requirement chosen, the reservation inside its hook. */
  async function signPayload(c: Choice<X402Choice>, authorize: () => Promise<Authorization>) {
    const chosen = c.chosen.requirement;
    // The client sees only the requirement the policy chose: its own selection cannot drift.
    const paymentRequired = { ...c.chosen.terms.paymentRequired, accepts: [chosen.raw] } as Parameters<
      typeof client.createPaymentPayload
    >[0];
    const job: Job = {
      run: async (selected) => {
        if (selected !== chosen.raw)
          throw new CtlError(
            'payment_terms_refused',
            'the x402 client selected a requirement the gateway did not choose',
          );
        await authorize(); // the session's checks and the reservation, before any signature exists
      },
    };
    jobs.set(paymentRequired, job);
    try {
      return await client.createPaymentPayload(paymentRequired);
    } catch (e) {
      if (job.error) throw job.error; // the refusal, with its own code
      throw new CtlError(
        'payment_terms_refused',
        `x402: the payment could not be signed: ${(e as Error)?.message ?? 'error'}`,
      );
    }
  }

  return {
    name: X402_RAIL,
    title: 'x402',
    detect: detectX402,

    async choose(terms, session) {
      const requirement = chooseRequirement(terms, { currency: session.currency, assets, maxTimeoutSeconds });
      if (requirement.scheme === 'upto')
        await permit2.allowance(requirement.network, requirement.asset, requirement.amount);
      return {
        amount: requirement.amount,
        currency: session.currency,
        address: requirement.payTo,
        receiptRail: authorizationRail(X402_RAIL, requirement),
        chosen: { terms, requirement },
      };
    },

    async sign(c, authorize) {
      const chosen = c.chosen.requirement;
      const hold = chosen.scheme === 'upto';
      const payload: PaymentPayload | PaymentPayloadV1 = await signPayload(c, authorize);
      // `upto`: the head now, before the permit leaves: no settle of it can be in an older block,
      // so the search for its settle starts here (evm/permit2.ts uptoSettlement).
      const fromBlock = hold ? await permit2.head(chosen.network) : undefined;
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(http.encodePaymentSignatureHeader(payload as PaymentPayload)))
        headers[k.toLowerCase()] = v;
      return {
        headers,
        authorization: {
          signed: hold ? signedPermit(payload, chosen) : signedAuthorization(payload),
          // The validity signed is the one the policy capped (5 s for the clock read).
          chosen: {
            payTo: chosen.payTo,
            amount: chosen.amount,
            payer: account.address,
            latestValidBefore: d.now() + (chosen.maxTimeoutSeconds + 5) * 1000,
          },
          table: X402_TABLE,
          record: { network: chosen.network, asset: chosen.asset, payTo: chosen.payTo },
          extra: x402Columns({ version: c.chosen.terms.version, ...(hold ? { scheme: 'upto' } : {}), fromBlock }),
        },
      };
    },

    read: (res, credential, c) => readSettlement(d.evm.chain, permit2, res, credential, c.chosen.requirement),
  };
}

/** The x402 scheme, as payments/registry.ts lists it. */
export const x402Scheme: SchemeModule = {
  name: X402_RAIL,
  create: createX402Scheme,
  rail: (d) =>
    createAuthorizationRail({
      name: X402_RAIL,
      table: X402_TABLE,
      db: d.db,
      now: d.now,
      chain: d.evm.chain,
      expiryMarginMs: d.evm.expiryMarginMs,
    }),
  migrations: X402_MIGRATIONS,
};
