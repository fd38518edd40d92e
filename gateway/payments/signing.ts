/**
 * What the gateway signs for a payment (spec §4.2 steps 2–3): the SBA, under the session's
 * internal grant with its actor key, and the receipt that embeds it, in the form the store keeps
 * it (store.ts ReceiptRow: the grant apart, once).
 */
import { createHash } from 'node:crypto';
import {
  CtlError,
  formatTimestamp,
  type Receipt,
  type ReceiptFields,
  type SignedBudgetAuthorization,
} from '../../src/index.js';
// Prepared signing, as a signing service imports it (ctl/wallet): the grant checked and canonicalised once per session.
import { createSbaSigner, type SbaSigner } from '../../src/entries/wallet.js';
// A receipt per payment, each embedding an SBA over the signer's frozen grant: that grant checked
// and canonicalised once (services-only signing: the `ctl/server` entry).
import { signReceiptPrepared } from '../../src/entries/server.js';
import { idleCache, timeOrderedId } from '../../service-kit/index.js';
import type { SessionRecord } from '../sessions/store.js';
import type { KeyRing } from '../keys/ring.js';
import type { SessionKeys } from '../sessions/actor-keys.js';
import type { ReceiptRow } from './store/payments.js';

const SBA_LIFETIME_MS = 5 * 60_000;

/** One payment as its SBA and receipt name it. */
export interface PaymentFields {
  id: string;
  amount: bigint;
  currency: string;
  merchant: string;
  purpose: string;
  rail: string;
}

/** A signed receipt, the row that stores it, and what to call once that row's change committed. */
export interface SignedReceipt {
  receiptId: string;
  receipt: Receipt;
  row: ReceiptRow;
  committed: () => void;
}

/**
 * A session's SBA signer, and the grant every SBA it signs embeds as its receipts store it: apart,
 * once (store.ts ReceiptRow), its canonical text and that text's SHA-256 the key.
 * `stored` turns true once a change that wrote it has committed; until then each receipt's change
 * writes it again (which changes nothing once one has).
 */
interface SessionSigning {
  signer: SbaSigner;
  grant: { hash: string; text: string; stored: boolean };
}

export function createPaymentSigning(deps: { keys: KeyRing; sessionKeys: SessionKeys; now: () => number }) {
  const { keys, now } = deps;
  // Per session, bounded by the sessions in use (service-kit/idle-cache.ts): made again on demand.
  const prepared = idleCache<string, Promise<SessionSigning>>();

  /** The key of a session's signing: its id and its grant's signature (sbaSigning). */
  const signingKey = (session: SessionRecord) => `${session.id} ${session.grant.signature}`;

  /**
   * What signing an SBA under the session's grant computes once (the grant checked and
   * canonicalised, the actor key imported and matched to it), cached by session id and the
   * grant's signature: a grant minted anew (a continued session's raised ceiling) is another key,
   * so no SBA is ever signed over stale grant bytes. Every SBA it signs embeds the signer's own
   * deep-frozen copy of the grant, which `signReceiptPrepared` therefore checks and canonicalises
   * once for all the receipts that embed these SBAs.
   */
  function sbaSigning(session: SessionRecord): Promise<SessionSigning> {
    const id = signingKey(session);
    let p = prepared.get(id);
    if (!p) {
      p = deps.sessionKeys.signingKey(session).then(async (ak) => {
        const signer = await createSbaSigner(session.grant, { signingKey: ak.key, keyId: ak.kid, now });
        const text = signer.grantJcs;
        return { signer, grant: { hash: createHash('sha256').update(text).digest('base64url'), text, stored: false } };
      });
      p.catch(() => prepared.delete(id));
      prepared.set(id, p);
    }
    return p;
  }

  /**
   * How `receipt` is stored: without its SBA's grant when that grant is the session signer's own
   * frozen copy (so exactly the text kept), whole otherwise (an SBA read back by reconcile).
   */
  async function receiptRow(
    session: SessionRecord,
    receiptId: string,
    paidAt: number,
    paymentId: string,
    receipt: Receipt,
  ): Promise<{ row: ReceiptRow; committed: () => void }> {
    const sba = receipt.sba;
    const kept = sba && prepared.get(signingKey(session));
    const signing = kept ? await kept.catch(() => undefined) : undefined;
    if (!sba || !signing || sba.grant !== signing.signer.grant)
      return { row: { receiptId, paymentId, paidAt, receipt: JSON.stringify(receipt) }, committed: () => {} };
    const { grant: _kept, ...sbaWithoutGrant } = sba;
    const g = signing.grant;
    const grant = { hash: g.hash, text: g.stored ? undefined : g.text };
    return {
      row: { receiptId, paymentId, paidAt, receipt: JSON.stringify({ ...receipt, sba: sbaWithoutGrant }), grant },
      committed: () => {
        g.stored = true;
      },
    };
  }

  return {
    /**
     * The SBA of one payment, signed under the session's internal grant with its actor key. A
     * session whose `expiresAt` passed since its state was read (spec §3 last row) is
     * `session_expired`: the SBA could not outlive it.
     */
    async sba(session: SessionRecord, p: PaymentFields): Promise<SignedBudgetAuthorization> {
      const t = now();
      if (session.expiresAt <= t)
        throw new CtlError(
          'session_expired',
          'the session expired before the payment could be signed; nothing was paid',
        );
      const { signer } = await sbaSigning(session);
      return signer.sign({
        sessionId: session.id,
        actorId: `gateway:${session.id}`,
        maxAmountMinor: p.amount.toString(),
        budgetScope: 'SESSION',
        budgetId: p.id,
        expiresAt: formatTimestamp(Math.min(session.expiresAt, t + SBA_LIFETIME_MS)),
        rail: p.rail,
        merchantId: p.merchant,
        purpose: p.purpose,
        issuer: session.grant.issuer,
      });
    },

    /**
     * The receipt of a payment made (`txRef`), embedding its SBA, and the row that stores it;
     * with `captured`, the receipt of a hold of `p.amount` captured at that amount.
     */
    async receipt(
      session: SessionRecord,
      p: PaymentFields,
      txRef: string,
      paidAt: number,
      sba: SignedBudgetAuthorization | undefined,
      captured?: bigint,
    ): Promise<SignedReceipt> {
      const receiptId = `rcpt_${timeOrderedId()}`;
      const rk = await keys.active('receipt');
      const fields: ReceiptFields = {
        receiptId,
        sessionId: session.id,
        grantId: session.grantId,
        purpose: p.purpose,
        // A hold's receipt: what was captured, beside the hold (PROTOCOL.md §15).
        amount: { amountMinor: (captured ?? p.amount).toString(), currency: p.currency },
        ...(captured !== undefined ? { authorizedAmountMinor: p.amount.toString() } : {}),
        merchant: p.merchant,
        paidAt: formatTimestamp(paidAt),
        txRef,
        rail: p.rail,
      };
      // An SBA this process just signed embeds its signer's frozen grant, checked and canonicalised
      // once for all its receipts; one read back from the database (reconcile), whole every time.
      if (sba) fields.sba = sba;
      const receipt = await signReceiptPrepared(fields, { signingKey: rk.signingKey, keyId: rk.kid });
      const { row, committed } = await receiptRow(session, receiptId, paidAt, p.id, receipt);
      return { receiptId, receipt, row, committed };
    },
  };
}

export type PaymentSigning = ReturnType<typeof createPaymentSigning>;
