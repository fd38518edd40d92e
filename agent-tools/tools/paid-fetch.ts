/**
 * `paid_fetch`: one HTTP request through the gateway's /proxy (spec §4.2), which pays a
 * merchant's 402 from the session's budget and answers the merchant's final response. The SDK's
 * agent client sends it (src/client: one Idempotency-Key per call, reused on its own retries).
 */
import { z } from 'zod';
import { isPurpose, newId } from '../../src/index.js';
import { DEFAULT_MAX_BODY_BYTES, MAX_BODY_BYTES, encodeBody, limitBody, requestBody } from '../response-body.js';
import { describeRefusal, refusalOf, unreachableMessage } from '../refusals.js';
import { defineTool } from './tool.js';

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;
const money = z.object({
  amountMinor: z.string().describe('Amount in minor units of the currency (cents for USD), as a decimal string.'),
  currency: z.string(),
});

const input = {
  url: z
    .string()
    .url()
    .describe('Absolute http(s) URL of the resource to fetch, e.g. https://api.example.com/search?q=tides.'),
  method: z.enum(METHODS).default('GET').describe('HTTP method sent to the merchant.'),
  headers: z
    .record(z.string())
    .optional()
    .describe(
      'Request headers for the merchant, e.g. {"content-type": "application/json"}. The ' +
        'gateway does not forward Authorization, Cookie, X-Payment*, X-Ctl-* or hop-by-hop headers.',
    ),
  body: z.string().optional().describe('Request body: text, or base64 when bodyEncoding is "base64".'),
  bodyEncoding: z
    .enum(['text', 'base64'])
    .default('text')
    .describe('How body is written: "text" (sent as UTF-8) or "base64" (binary).'),
  purpose: z
    .string()
    .refine(isPurpose, 'a purpose is <domain>:<kind>, lower case, e.g. api:search')
    .optional()
    .describe(
      'Why this is paid, as <domain>:<kind> (e.g. api:search). Required for any call that ' +
        "costs money: it must be one of the session's purposes (session_status lists them).",
    ),
  maxBodyBytes: z
    .number()
    .int()
    .min(1)
    .max(MAX_BODY_BYTES)
    .default(DEFAULT_MAX_BODY_BYTES)
    .describe(
      `The most of the response body to return, in bytes (default ${DEFAULT_MAX_BODY_BYTES}). ` +
        'A longer body is cut (truncated: true, bodyBytes: its full size); to get more, call ' +
        'again with a larger value and the same idempotencyKey: the stored answer is replayed, ' +
        'not paid again.',
    ),
  idempotencyKey: z
    .string()
    .regex(/^[\x20-\x7e]{1,255}$/)
    .optional()
    .describe(
      'Printable ASCII, 1–255 characters. Reuse the key of an earlier call to retry that ' +
        'same request: the gateway pays it at most once and replays its answer. Default: a ' +
        'new key per call (returned in the result).',
    ),
};

const output = {
  outcome: z
    .enum(['response', 'paused', 'refused', 'failed'])
    .describe(
      'response: the merchant answered (any HTTP status; paid or free). paused: the session ' +
        'hit its soft limit and the budget owner must approve (ownerAction). refused: the ' +
        'gateway refused (code). failed: the gateway could not be reached or the input was unusable.',
    ),
  status: z.number().int().optional().describe("The merchant's HTTP status (outcome response)."),
  headers: z.record(z.string()).optional().describe("The merchant's response headers."),
  body: z.string().optional().describe("The merchant's response body, as text or base64 (bodyEncoding)."),
  bodyEncoding: z.enum(['text', 'base64']).optional(),
  truncated: z.boolean().optional().describe('true when the body was cut at maxBodyBytes.'),
  bodyBytes: z.number().int().optional().describe("The full size of the merchant's body in bytes, when it was cut."),
  receiptId: z
    .string()
    .optional()
    .describe("The gateway's signed receipt (rcpt_…) when this call paid; list_receipts shows it."),
  amountPaid: money
    .optional()
    .describe(
      'What this call paid; absent when nothing was paid. On a replayed answer, what the ' +
        'original call paid (not paid again).',
    ),
  amountHeld: money
    .optional()
    .describe(
      'When the merchant billed by use (a hold, then a capture): the most this call could ' +
        'have paid, held while it ran. amountPaid is what was captured; the rest was released ' +
        'to the budget.',
    ),
  replayed: z
    .boolean()
    .optional()
    .describe(
      'true when this is the stored answer of an earlier call with the same idempotencyKey (nothing was paid again).',
    ),
  sessionId: z.string().optional(),
  idempotencyKey: z
    .string()
    .optional()
    .describe('The key this call used: pass it again to retry the same request safely.'),
  code: z
    .string()
    .optional()
    .describe(
      'PROTOCOL.md §9 error code of a refusal or pause (e.g. budget_exceeded, purpose_not_allowed, session_paused).',
    ),
  message: z.string().optional(),
  httpStatus: z.number().int().optional().describe("The gateway's HTTP status for a refusal or pause."),
  retryAfterSeconds: z.number().int().optional(),
  ownerAction: z
    .string()
    .optional()
    .describe('outcome paused: what the budget owner must do so this session can pay again.'),
  pauseKind: z
    .enum(['window', 'ceiling'])
    .optional()
    .describe(
      "outcome paused: 'window' when one budget window (e.g. a day's) reached its soft limit " +
        "(it resumes by itself at resetsAt), 'ceiling' when the session's whole budget did.",
    ),
  resetsAt: z
    .string()
    .optional()
    .describe('When the budget window that refused (window_exceeded) or paused this call resets, ISO 8601 UTC.'),
  nextStep: z.string().optional().describe('What to do next.'),
};

export const paidFetch = defineTool({
  name: 'paid_fetch',
  title: 'Fetch a URL, paying for it if the merchant asks (HTTP 402)',
  description:
    'Sends one HTTP request through the CTL payment gateway. If the merchant answers 402 ' +
    "Payment Required, the gateway pays it from this agent's " +
    ('session budget (only for an allowed purpose, merchant and amount) and returns the ' +
      "merchant's final answer, with the receipt id and amount paid. ") +
    ('Free resources come back unchanged. The budget owner sets the limits; if the session ' +
      'is paused at its soft limit the result says so (outcome "paused") ') +
    ('and what the owner must do: ask them, never try to get around a limit. Refusals carry ' +
      'a code (e.g. budget_exceeded, purpose_not_allowed).'),
  input,
  output,
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
  async run(args, { session, gatewayUrl, keyPrefix }) {
    const idempotencyKey = args.idempotencyKey ?? newId(keyPrefix);
    let body: Uint8Array<ArrayBuffer> | undefined;
    try {
      body = requestBody(args.body, args.bodyEncoding);
    } catch (e) {
      return { value: { outcome: 'failed', code: 'malformed', message: (e as Error).message, idempotencyKey } };
    }
    let res: Response;
    try {
      res = await session.fetch(args.url, {
        method: args.method,
        headers: args.headers,
        body,
        purpose: args.purpose,
        idempotencyKey,
      });
    } catch (e) {
      const refusal = refusalOf(e);
      if (!refusal) {
        return {
          value: {
            outcome: 'failed',
            code: 'unavailable',
            idempotencyKey,
            message: unreachableMessage(e, gatewayUrl),
            nextStep: 'Retry later with the same idempotencyKey; if it persists, tell the budget owner.',
          },
        };
      }
      // The owner is told which session to approve: its id, learned from the gateway's answers or asked for.
      const sessionId =
        session.sessionId ??
        (refusal.code === 'session_paused'
          ? await session.status().then(
              (v) => v.sessionId,
              () => undefined,
            )
          : undefined);
      const described = { ...describeRefusal(refusal, gatewayUrl, sessionId), idempotencyKey };
      // A pause is a question for the owner, not a failure of the tool: an ordinary result.
      if (described.outcome === 'paused')
        return { value: described, lead: `PAUSED, nothing paid: ${described.nextStep} ${described.ownerAction}` };
      return {
        value: described,
        lead: `Refused by the gateway (${described.code}): ${described.message}. ${described.nextStep}`,
      };
    }

    const headers: Record<string, string> = {};
    res.headers.forEach((v, k) => (headers[k] = v));
    const receiptId = res.headers.get('x-ctl-receipt-id') ?? undefined;
    const full = new Uint8Array(await res.arrayBuffer());
    const limited = limitBody(full, args.maxBodyBytes);
    const encoded = encodeBody(limited.bytes, res.headers.get('content-type'));
    let amountPaid: { amountMinor: string; currency: string } | undefined;
    let amountHeld: { amountMinor: string; currency: string } | undefined;
    let note: string | undefined;
    if (receiptId) {
      // The signed receipt is the record of what was paid (spec §2.4); a hold's receipt also
      // carries the maximum it authorised beside what was captured (PROTOCOL.md §15).
      try {
        const receipt = await session.receipt(receiptId);
        const amount = receipt.amount as { amountMinor?: unknown; currency?: unknown } | undefined;
        if (typeof amount?.amountMinor === 'string' && typeof amount.currency === 'string') {
          amountPaid = { amountMinor: amount.amountMinor, currency: amount.currency };
          if (typeof receipt.authorizedAmountMinor === 'string')
            amountHeld = { amountMinor: receipt.authorizedAmountMinor, currency: amount.currency };
        }
      } catch (e) {
        note =
          `paid (receipt ${receiptId}), but the receipt could not be read: ${(e as Error).message}; ` +
          'list_receipts shows it';
      }
    }
    const value = {
      outcome: 'response',
      status: res.status,
      headers,
      ...encoded,
      ...(limited.truncated ? { truncated: true, bodyBytes: full.length } : {}),
      ...(receiptId ? { receiptId } : {}),
      ...(amountPaid ? { amountPaid } : {}),
      ...(amountHeld ? { amountHeld } : {}),
      ...(res.headers.get('idempotent-replayed') === 'true' ? { replayed: true } : {}),
      ...(session.sessionId ? { sessionId: session.sessionId } : {}),
      idempotencyKey,
      ...((note ?? limited.truncated)
        ? {
            nextStep:
              note ??
              `The body was cut at ${limited.bytes.length} of ${full.length} bytes: call again with ` +
                `a larger maxBodyBytes and idempotencyKey "${idempotencyKey}" to get more (replayed, ` +
                'not paid again).',
          }
        : {}),
    };
    return { value };
  },
});
