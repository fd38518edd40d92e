/**
 * Gateway merchant mode (spec §4.1): a merchant asks for payment terms on the ledger
 * rail (`POST /charge`), puts them in its 402 `X-Payment`, and checks the `X-Payment-Receipt`
 * it gets (`GET /charge/{id}/verify`, `{id}` a charge id or a `txid:` reference).
 */
import type Router from '@koa/router';
import type { Middleware } from 'koa';
import { randomBytes } from 'node:crypto';
import { parseStrictJson, isAmount, isCurrency } from '../../src/index.js';
import { jsonBody, badRequest, notFound, closedBody, optionalText, type SqlDatabase } from '../../service-kit/index.js';
import type { createLedgerRail } from '../payments/ledger.js';
import { MAX_AMOUNT } from '../../service-kit/amount.js';

type Ledger = ReturnType<typeof createLedgerRail>;

/**
 * `limit`: spent by every `POST /charge` before its body is read (service-kit/service-limits.ts: per
 * client address, since the route takes no key and each charge is a row).
 */
export function merchantRoutes(
  router: Router,
  o: {
    db: SqlDatabase;
    ledger: Ledger;
    now: () => number;
    baseUrl: (ctx: any) => string;
    limit?: Middleware;
  },
): void {
  const body = jsonBody({ limit: '16kb', parse: parseStrictJson });
  const limit: Middleware = o.limit ?? ((_ctx, next) => next());

  router.post('/charge', limit, body, async (ctx) => {
    const b = closedBody(ctx.request.body, ['amount', 'currency', 'description']);
    if (!isAmount(b.amount) || b.amount === '0' || BigInt(b.amount) > MAX_AMOUNT)
      throw badRequest('amount: a positive decimal string of minor units');
    if (!isCurrency(b.currency)) throw badRequest('currency: a currency code such as "USD"');
    const description = optionalText(b, 'description', 500);
    const chargeId = `ch_${randomBytes(16).toString('base64url')}`;
    await o.db.run(`INSERT INTO gw_charges (id, amount, currency, description, created_at) VALUES (?, ?, ?, ?, ?)`, [
      chargeId,
      BigInt(b.amount),
      b.currency,
      description,
      o.now(),
    ]);
    // The charge id is the pay-to address: a ledger payment to it is a payment of this charge.
    const terms = { amount: b.amount, currency: b.currency, address: chargeId };
    ctx.status = 201;
    ctx.body = {
      chargeId,
      paymentTerms: terms,
      xPayment: JSON.stringify(terms),
      verifyUrl: `${o.baseUrl(ctx)}/charge/${chargeId}/verify`,
    };
  });

  router.get('/charge/:id/verify', async (ctx) => {
    const id = ctx.params.id!;
    if (id.startsWith('txid:')) {
      const e = await o.ledger.lookup(id);
      if (!e) throw notFound(`no payment '${id}'`);
      ctx.body = {
        paid: true,
        txRef: e.txRef,
        amountMinor: e.amount.toString(),
        currency: e.currency,
        address: e.address,
        paidAt: new Date(e.paidAt).toISOString(),
      };
      return;
    }
    const c = await o.db.get(`SELECT id, amount, currency FROM gw_charges WHERE id = ?`, [id]);
    if (!c) throw notFound(`no charge '${id}'`);
    const amount = BigInt(c.amount as string | number);
    const payments = (await o.ledger.paidTo(id)).filter((e) => e.currency === c.currency && e.amount === amount);
    const first = payments[0];
    ctx.body = {
      chargeId: id,
      amountMinor: amount.toString(),
      currency: c.currency,
      paid: payments.length > 0,
      ...(first ? { txRef: first.txRef, paidAt: new Date(first.paidAt).toISOString() } : {}),
      payments: payments.length,
    };
  });

  router.get('/.well-known/x402-payment-info', (ctx) => {
    const base = o.baseUrl(ctx);
    ctx.body = {
      rails: ['ledger'],
      paymentTermsHeader: 'X-Payment',
      receiptHeader: 'X-Payment-Receipt',
      sbaHeader: 'X-Ctl-Sba',
      chargeUrl: `${base}/charge`,
      verifyUrl: `${base}/charge/{id}/verify`,
      keysUrl: `${base}/.well-known/ctl-keys.json`,
      trustBundleUrl: `${base}/.well-known/ctl-trust-bundle.json`,
    };
  });
}
