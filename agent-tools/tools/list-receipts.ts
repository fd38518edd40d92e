/**
 * `list_receipts`: the session's signed receipts (spec §2.4), newest first: what was paid, to
 * whom, for which purpose, when.
 */
import { z } from 'zod';
import { failedRead } from '../refusals.js';
import { defineTool } from './tool.js';

const receipt = z.object({
  receiptId: z.string(),
  paidAt: z.string().optional().describe('ISO 8601 UTC.'),
  amount: z
    .object({ amountMinor: z.string(), currency: z.string() })
    .optional()
    .describe('Minor units (cents for USD).'),
  merchant: z.string().optional(),
  purpose: z.string().optional(),
  txRef: z.string().optional().describe("The rail's payment reference, txid:<reference>."),
  signed: z
    .record(z.unknown())
    .optional()
    .describe(
      "The whole signed receipt (with includeSigned), verifiable against the gateway's /.well-known/ctl-keys.json.",
    ),
});

const str = (v: unknown) => (typeof v === 'string' ? v : undefined);

export const listReceipts = defineTool({
  name: 'list_receipts',
  title: 'Payment receipts of this session',
  description:
    "The gateway's signed receipts for the payments this agent's session made, newest " +
    'first: receipt id, amount (minor units, e.g. cents), merchant, purpose, time. Costs nothing.',
  input: {
    limit: z.number().int().min(1).max(500).default(50).describe('How many of the newest receipts to return (1–500).'),
    includeSigned: z
      .boolean()
      .default(false)
      .describe('Also return each whole signed receipt (large: it embeds the payment authorization).'),
  },
  output: {
    sessionId: z.string(),
    total: z.number().int().describe('Receipts in the session.'),
    receipts: z.array(receipt),
  },
  annotations: { readOnlyHint: true, openWorldHint: false },
  async run({ limit, includeSigned }, { session, gatewayUrl }) {
    let all;
    try {
      all = await session.receipts();
    } catch (e) {
      return failedRead(e, gatewayUrl);
    }
    const newest = all.receipts.slice(-limit).reverse();
    return {
      value: {
        sessionId: all.sessionId,
        total: all.receipts.length,
        receipts: newest.map((r) => {
          const amount = r.amount as { amountMinor?: unknown; currency?: unknown } | undefined;
          return {
            receiptId: String(r.receiptId),
            ...(str(r.paidAt) ? { paidAt: str(r.paidAt) } : {}),
            ...(str(amount?.amountMinor) && str(amount?.currency)
              ? { amount: { amountMinor: str(amount!.amountMinor)!, currency: str(amount!.currency)! } }
              : {}),
            ...(str(r.merchant) ? { merchant: str(r.merchant) } : {}),
            ...(str(r.purpose) ? { purpose: str(r.purpose) } : {}),
            ...(str(r.txRef) ? { txRef: str(r.txRef) } : {}),
            ...(includeSigned ? { signed: r } : {}),
          };
        }),
      },
    };
  },
});
