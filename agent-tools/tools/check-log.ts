/**
 * `check_log`: the gateway's transparency log, followed from the agent's side (the SDK client's
 * `client.log(vkey)`): the newest checkpoint is taken only when it is signed by the log key the
 * agent pins and extends the last checkpoint this agent kept (RFC 9162 §2.1.4 consistency), and
 * receipts can be proven included in it (§2.1.3). A log that rewrote its history, or shows this
 * agent a tree it does not show others, is refused with a stable code (`log_inconsistent`,
 * `log_proof_invalid`, `checkpoint_signature_invalid`), and the kept checkpoint stays as it was.
 */
import { z } from 'zod';
import { failedRead } from '../refusals.js';
import { defineTool, type ToolAnswer } from './tool.js';

const NEXT_STEP: Record<string, string> = {
  log_inconsistent:
    "The gateway's log contradicts what this agent saw before (a rewritten history or a split view). " +
    'Stop paying through this gateway and tell the budget owner; keep this result as evidence.',
  log_proof_invalid:
    "The gateway's proof does not hold: its log is not what it claims. Stop paying and tell the budget owner.",
  checkpoint_signature_invalid:
    'The checkpoint is not signed by the log key this agent pins. Stop paying and tell the budget owner.',
  checkpoint_origin_mismatch: "The checkpoint is of another log than the pinned key's. Tell the budget owner.",
};

const refused = (code: string, message: string, extra: Record<string, unknown> = {}): ToolAnswer => {
  const nextStep = NEXT_STEP[code] ?? 'The log check failed; see code and message, and tell the budget owner.';
  return {
    value: { outcome: 'refused', code, message, ...extra, nextStep },
    lead: `The gateway's transparency log failed the check (${code}): ${message}. ${nextStep}`,
  };
};

const b64 = (h: Uint8Array) => {
  let s = '';
  for (const b of h) s += String.fromCharCode(b);
  return btoa(s);
};

export const checkLog = defineTool({
  name: 'check_log',
  title: "Check the gateway's transparency log",
  description:
    "Fetches the gateway's latest log checkpoint and checks it is signed by the pinned log key and " +
    'consistent with the last one this agent saw (no rewritten history, no split view); with ' +
    'receiptIds, also proves those receipts of this session are in the log. Costs nothing.',
  input: {
    receiptIds: z
      .array(z.string().min(1).max(128))
      .max(20)
      .default([])
      .describe('Receipts of this session to prove included (list_receipts gives their ids).'),
  },
  output: {
    outcome: z.literal('consistent'),
    origin: z.string().describe("The log's name."),
    size: z.number().int().describe('Entries in the checkpoint kept now.'),
    rootHash: z.string().describe('Its RFC 6962 root hash, base64.'),
    previousSize: z.number().int().nullable().describe('The size this agent had seen before (null: the first check).'),
    included: z.array(z.object({ receiptId: z.string(), index: z.number().int().optional() })),
  },
  annotations: { readOnlyHint: true, openWorldHint: false },
  async run({ receiptIds }, { session, gatewayUrl, log }) {
    if (!log)
      return {
        value: {
          outcome: 'failed',
          code: 'unsupported_feature',
          message: "no log key pinned: set the gateway log's vkey (CTL_GATEWAY_LOG_VKEY, or the logVkey option)",
          nextStep: 'Ask the budget owner for the gateway\u2019s log key (GET /log/vkey, checked out of band).',
        },
        lead: 'check_log needs the gateway log key (CTL_GATEWAY_LOG_VKEY or logVkey): unsupported_feature.',
      };
    let before: number | null;
    let after;
    try {
      before = (await log.checkpoint())?.size ?? null;
      after = await log.refresh();
    } catch (e) {
      return failedRead(e, gatewayUrl);
    }
    if (!after.valid) return refused(after.error.code, after.error.message, { previousSize: before });
    const included: Array<{ receiptId: string; index?: number }> = [];
    if (receiptIds.length) {
      let all;
      try {
        all = await session.receipts();
      } catch (e) {
        return failedRead(e, gatewayUrl);
      }
      const indices = ((all as { logIndex?: Record<string, number> }).logIndex ?? {}) as Record<string, number>;
      for (const id of receiptIds) {
        const receipt = all.receipts.find((r) => r.receiptId === id);
        if (!receipt) return refused('not_found', `no receipt ${id} in this session`);
        let r;
        try {
          r = await log.verifyReceiptIncluded(receipt as { receiptId: string }, indices[id]);
        } catch (e) {
          return failedRead(e, gatewayUrl);
        }
        if (!r.valid) return refused(r.error.code, `receipt ${id}: ${r.error.message}`);
        included.push({ receiptId: id, ...(indices[id] !== undefined ? { index: indices[id] } : {}) });
      }
    }
    const cp = after.checkpoint;
    return {
      value: {
        outcome: 'consistent',
        origin: cp.origin,
        size: cp.size,
        rootHash: b64(cp.rootHash),
        previousSize: before,
        included,
      },
      lead:
        `The gateway's log (${cp.size} entries) is signed by the pinned key and ` +
        (before === null ? 'now kept as the first checkpoint seen' : `extends the ${before} entries seen before`) +
        (included.length ? `; ${included.length} receipt(s) proven included.` : '.'),
    };
  },
});
