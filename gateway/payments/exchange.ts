/**
 * The paid exchange, written once for every scheme (spec §4.2 steps 2–3, PROTOCOL.md §7, §15).
 * A scheme (payments/schemes/scheme.ts) only speaks its wire format; the order of things, which
 * is what keeps the budget, is here:
 *
 *   1. the scheme chooses what to pay of the 402: nothing reserved, nothing signed;
 *   2. the session's checks and the atomic reservation, with the SBA (service.ts authorize), run
 *      when the scheme calls `authorize()`, just before a signature can exist: a refusal ends the
 *      exchange with no signature and no header;
 *   3. a signed authorization the merchant can cash is checked against the choice, recorded
 *      (evm/authorizations.ts) and the payment marked `paying` before the retry carries it;
 *   4. the merchant's answer is read into an Outcome: what the chain shows moved is committed
 *      with a receipt; anything else holds the reservation while the signature may still be cashed
 *      (reconcile settles it from the chain once it expires). A merchant's word never releases it.
 *
 * The gateway's own rail (the X-Payment scheme) pays before the retry, or captures a hold after
 * it; once a payment is committed, a retry that fails is `paidResponseLost`.
 */
import { CtlError, base64Encode, utf8Encode, type SignedBudgetAuthorization } from '../../src/index.js';
import { HttpError, type SqlDatabase } from '../../service-kit/index.js';
import { DEFAULT_STATUS_BY_CODE } from '../../service-kit/error-middleware.js';
import type { SessionRecord } from '../sessions/store.js';
import type { ForwardResponse } from '../net/forwarder.js';
import type { Authorization, PaymentService } from './service.js';
import { insertAuthorization, recordAuthorizationOutcome, signedAsChosen } from './evm/authorizations.js';
import type {
  Choice,
  Credential,
  MerchantAnswer,
  Outcome,
  PaidExchange,
  PaidExchangeContext,
  PaymentProtocol,
  PaymentScheme,
} from './schemes/scheme.js';

interface ExchangeDeps {
  db: SqlDatabase;
  payments: PaymentService;
  schemes: readonly PaymentScheme[];
  now: () => number;
}

/**
 * The protocols routes/proxy.ts runs, one per scheme in the schemes' order: the first that
 * detects a 402 pays it; a scheme that then declines it hands it to the next that detects it.
 * @example proxyRoutes(router, { protocols: createExchange({ db, payments, schemes, now }), … })
 */
export function createExchange(o: ExchangeDeps): PaymentProtocol<{ offer: unknown; res: MerchantAnswer }>[] {
  async function pay(i: number, offer: unknown, res: MerchantAnswer, x: PaidExchangeContext): Promise<PaidExchange> {
    const scheme = o.schemes[i]!;
    const choice = await scheme.choose(offer, x.session);
    if (choice !== undefined)
      return choice.payFirst ? payFirst(o, scheme, choice, x) : payOnRetry(o, scheme, choice, x);
    for (let j = i + 1; j < o.schemes.length; j++) {
      const other = o.schemes[j]!.detect(res);
      if (other !== undefined) return pay(j, other, res, x);
    }
    return { response: res as ForwardResponse }; // an unknown 402 passes through, as routes/proxy.ts does
  }
  return o.schemes.map((scheme, i) => ({
    name: scheme.name,
    detect(res: MerchantAnswer) {
      const offer = scheme.detect(res);
      return offer === undefined ? undefined : { offer, res };
    },
    pay: (t: { offer: unknown; res: MerchantAnswer }, x: PaidExchangeContext) => pay(i, t.offer, t.res, x),
  }));
}

/** Steps 2 to 4, for a payment the merchant settles on the paid retry. */
async function payOnRetry(
  o: ExchangeDeps,
  scheme: PaymentScheme,
  choice: Choice,
  x: PaidExchangeContext,
): Promise<PaidExchange> {
  const started = performance.now();
  const { a, credential } = await authorizeAndSign(o.payments, scheme, choice, x);
  const out = credential.authorization;
  if (!out && scheme.name !== o.payments.railName) {
    // Only the gateway's own rail pays without a signed authorization: any other scheme's
    // credential would leave unrecorded, and a lost answer would give its reservation back.
    await o.payments.abandon(a.paymentId, scheme.name);
    throw new Error(`${scheme.name}: a credential without a signed authorization`);
  }
  if (out) {
    // Checked, recorded, then `paying`, then sent: reconcile() always knows of a signature that is out.
    // Against what was reserved (payee and value), not only the scheme's record of its choice.
    const reserved = { ...out.chosen, payTo: choice.address, amount: a.amount };
    if (!signedAsChosen(out.signed, out.chosen) || !signedAsChosen(out.signed, reserved)) {
      await o.payments.abandon(a.paymentId, scheme.name);
      const why = `${scheme.title}: the signed authorization does not match the chosen terms`;
      throw new CtlError('payment_terms_refused', why);
    }
    const s = out.signed!;
    const validBefore = Number(s.validBefore) * 1000;
    const record = { ...out.record, paymentId: a.paymentId, payer: s.from.toLowerCase(), nonce: s.nonce, validBefore };
    await insertAuthorization(o.db, out.table, record, out.extra, o.now());
    if (!(await o.payments.markPaying(a)))
      throw new HttpError(409, 'conflict', 'the payment was settled by reconciliation before it was sent');
  }
  const response = await retry(o, scheme, credential, a, x);
  let outcome: Outcome;
  try {
    outcome = await scheme.read(response, credential, choice, a);
  } catch (e) {
    // An answer that cannot be read: with nothing cashable out, nothing was paid.
    if (!out) await o.payments.abandon(a.paymentId, scheme.name, 'payment_terms_refused');
    throw e;
  }
  return settle(o, scheme, { choice, credential, a, session: x.session, response, started }, outcome);
}

/** Step 2 and the signature: the reservation only from inside the scheme's signing. */
async function authorizeAndSign(
  payments: PaymentService,
  scheme: PaymentScheme,
  choice: Choice,
  x: PaidExchangeContext,
) {
  let a: Authorization | undefined;
  const authorize = async () => {
    if (a) throw new Error(`${scheme.name}: authorize() called twice for one payment`);
    const terms = { amount: choice.amount, currency: choice.currency, address: choice.address };
    a = await payments.authorize(x.session, terms, x.host, x.purpose, scheme.name);
    return a;
  };
  let credential: Credential;
  try {
    credential = await scheme.sign(choice, authorize);
  } catch (e) {
    // Reserved but not signed: nothing left the gateway, the payment is dead. A refusal by
    // authorize() itself reserved nothing.
    if (a) await payments.abandon(a.paymentId, scheme.name);
    throw e;
  }
  if (!a) throw new Error(`${scheme.name}: a credential was made without the gateway's authorization`);
  return { a: a as Authorization, credential };
}

/** The paid retry. A lost answer says nothing of a signature that is out: held, then reconciled. */
async function retry(o: ExchangeDeps, scheme: PaymentScheme, c: Credential, a: Authorization, x: PaidExchangeContext) {
  try {
    return await x.retry({ ...c.headers, ...sbaHeaders(x.session, a.sba) });
  } catch (e) {
    if (!c.authorization) {
      // Nothing is paid before the capture: a lost answer captures nothing.
      await o.payments.abandon(a.paymentId, scheme.name, 'upstream_error');
      throw e;
    }
    await recordAuthorizationOutcome(o.db, c.authorization.table, a.paymentId, 'unknown');
    throw new HttpError(
      e instanceof HttpError ? e.status : 502,
      'payment_unconfirmed',
      `the merchant did not answer the paid retry (${(e as Error)?.message ?? 'error'}); ${held(c)}`,
    );
  }
}

/** Step 4: what the chain shows moved is committed with a receipt; anything else holds. */
async function settle(
  o: ExchangeDeps,
  scheme: PaymentScheme,
  p: {
    choice: Choice;
    credential: Credential;
    a: Authorization;
    session: SessionRecord;
    response: ForwardResponse;
    started: number;
  },
  outcome: Outcome,
): Promise<PaidExchange> {
  const { choice, credential: c, a, session, response } = p;
  const rail = choice.receiptRail ?? scheme.name;
  if (outcome.kind === 'capture') {
    // The gateway's rail pays a hold's capture; never a release on the merchant's word while a signature is out.
    if (c.authorization) throw new Error(`${scheme.name}: a capture answered for a signed authorization`);
    const paid = await o.payments.capture(session, a, choice.address, outcome.amount);
    return { response, receiptId: paid?.receipt.receiptId };
  }
  if (outcome.disagreement) {
    const d = { paymentId: a.paymentId, merchant: a.merchant, payTo: choice.address, rail };
    await o.payments.settlementMismatch(session, {
      ...d,
      authorizedAmountMinor: a.amount.toString(),
      ...outcome.disagreement,
    });
  }
  const r = outcome.kind === 'paid' ? { outcome: 'paid', tx: outcome.tx, settled: outcome.captured } : outcome.record;
  if (c.authorization)
    await recordAuthorizationOutcome(o.db, c.authorization.table, a.paymentId, r.outcome, r.tx, r.settled);
  if (outcome.kind === 'held') throw new HttpError(502, 'payment_unconfirmed', `${outcome.why}; ${held(c)}`);
  // Served without a settlement the chain shows: the agent gets its answer, the money stays reserved.
  if (outcome.kind === 'served') return { response };
  const txRef = `txid:${outcome.tx}`;
  const { receipt } = await o.payments.complete(session, a, txRef, rail, p.started, outcome.captured);
  return { response, receiptId: String(receipt.receiptId) };
}

/** The gateway's own rail pays first and commits; the retry carries its proof. */
async function payFirst(
  o: ExchangeDeps,
  scheme: PaymentScheme,
  choice: Choice,
  x: PaidExchangeContext,
): Promise<PaidExchange> {
  const terms = { amount: choice.amount, currency: choice.currency, address: choice.address };
  const paid = await o.payments.pay(x.session, terms, x.host, x.purpose);
  const receiptId = paid.receipt.receiptId;
  try {
    const response = await x.retry({ ...scheme.paidHeaders!(paid), ...sbaHeaders(x.session, paid.sba) });
    return { response, receiptId };
  } catch (e) {
    // Paid and committed: whatever the retry's failure, the answer says so.
    throw paidResponseLost(receiptId, e);
  }
}

/** Why the agent is not answered with a receipt while a signature is out. */
function held(c: Credential): string {
  const until = new Date(Number(c.authorization?.signed?.validBefore) * 1000).toISOString();
  return `its reservation is held until the authorization expires (${until})`;
}

/**
 * The answer when a payment is committed with its receipt and the merchant's answer to the paid
 * retry then fails (a refused redirect, a timeout, a body too large, a reset): the money moved,
 * so the agent is told so, with the receipt, and that sending the request again pays again
 * (PROTOCOL.md §7: nothing paid twice for one intent). Never retried by the SDK client.
 * @example throw paidResponseLost(receipt.receiptId, e)
 */
export function paidResponseLost(receiptId: string, cause?: unknown): HttpError {
  // Only a refusal meant for the client (one with a protocol code, as the error middleware shows
  // them) says why; anything else (a database driver's text) is the operator's, never the agent's.
  const code = (cause as { code?: unknown } | undefined)?.code;
  const forClient =
    cause instanceof HttpError ||
    (cause instanceof Error && typeof code === 'string' && code in DEFAULT_STATUS_BY_CODE);
  const why = forClient
    ? `the merchant's answer to the paid request was lost: ${(cause as Error).message}`
    : 'the gateway failed before it could answer';
  return new HttpError(
    502,
    'paid_response_lost',
    `the payment was made (receipt ${receiptId}) but ${why}; sending the request again pays again`,
    { 'X-Ctl-Receipt-Id': receiptId },
  );
}

/** spec §1 trust level 1: the SBA rides along on the paid retry for merchants that can check it. */
function sbaHeaders(session: SessionRecord, sba: SignedBudgetAuthorization): Record<string, string> {
  return session.config.trustLevel === 1 ? { 'x-ctl-sba': base64Encode(utf8Encode(JSON.stringify(sba))) } : {};
}
