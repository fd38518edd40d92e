/**
 * The gateway's refusals as tool results an agent can act on. Every refusal carries its
 * PROTOCOL.md §9 code; a paused session (spec §3 paused row) is not a failure of the tool but a
 * question for the budget owner, so it comes back as an ordinary result saying who must do what.
 * Shared by every adapter of the tools (MCP, AI SDK, LangChain).
 */

/** What the agent is told to do next, per code (the gateway's message says what happened). */
const NEXT_STEP: Record<string, string> = {
  purpose_not_allowed: 'Pass a purpose the session allows (session_status lists them).',
  destination_not_allowed: 'The budget owner does not allow paying this merchant; do not retry it.',
  budget_exceeded: "The session's budget cannot cover this payment. Tell the budget owner; do not retry.",
  velocity_exceeded: "The session's rate of payments is used up for now; wait before paying again.",
  window_exceeded:
    "This period's budget window is used up: wait until resetsAt (retryAfterSeconds), " +
    'then retry; session_status shows each window.',
  delegation_invalid:
    'A child session can only narrow this one: lower the field the message names (session_status ' +
    "shows this session's limits).",
  currency_mismatch: 'The merchant asks for a currency this session cannot pay in.',
  asset_not_allowed: 'The merchant asks for an asset this session cannot pay in.',
  session_revoked: 'The budget owner revoked this session: stop paying and tell the owner.',
  session_expired: 'The session has expired: stop paying; the budget owner can create a new session.',
  target_not_allowed:
    'The URL cannot be fetched through the gateway (scheme, credentials in the URL, or a private address).',
  payment_terms_refused: "The gateway will not pay the merchant's payment terms.",
  payment_failed: 'The payment was not made and nothing was spent; the same call may be retried.',
  payment_unconfirmed:
    "The payment's outcome is not known yet and its amount stays reserved. Retry later " +
    'with the same idempotencyKey (never a new one), or it may be paid twice.',
  paid_response_lost:
    "The payment was made (receiptId) but the merchant's answer was lost. Do not call " +
    'again: a new call pays again. list_receipts shows the receipt; tell the budget owner.',
  upstream_error: 'The merchant could not be reached or answered too much; retry with the same idempotencyKey.',
  upstream_timeout: 'The merchant did not answer in time; retry with the same idempotencyKey.',
  rate_limited: 'Too many requests for this session: wait retryAfterSeconds, then retry.',
  conflict:
    'This idempotencyKey is in use by another request or still running; wait, or use a ' +
    'new key for a different request.',
  unauthorized: "The gateway does not accept this agent's session token: tell the budget owner.",
  payload_too_large: 'The request body is larger than the gateway accepts.',
};

import { CtlError, GatewayError, isServiceErrorCode } from '../src/index.js';
import type { ToolAnswer } from './tools/tool.js';

export interface Refusal {
  outcome: 'refused';
  code: string;
  message: string;
  httpStatus?: number;
  retryAfterSeconds?: number;
  /** The payment a `paid_response_lost` refusal made. */
  receiptId?: string;
  /** `window_exceeded`: when the full window ends (PROTOCOL.md §13). */
  resetsAt?: string;
  nextStep: string;
}

export interface PauseNotice {
  outcome: 'paused';
  code: 'session_paused';
  message: string;
  httpStatus: number;
  /** `window`: one budget window's soft limit, which lifts by itself at `resetsAt`; `ceiling`: the session's. */
  pauseKind: 'window' | 'ceiling';
  resetsAt?: string;
  sessionId?: string;
  ownerAction: string;
  nextStep: string;
}

/**
 * What the budget owner must do to resume a paused session, in words an agent can pass on
 * (gateway/README.md: the console, or the owner API's PATCH with the continuation token).
 * @example ownerActionForPause('https://gw.example', 'sess_abc')
 */
export function ownerActionForPause(gatewayUrl: string, sessionId: string | undefined): string {
  const id = sessionId ?? '<session id>';
  return (
    `The budget owner must approve more spending for session ${id}: in the gateway console ` +
    `(${gatewayUrl}/console, open the session, approve its continuation), ` +
    (`or with their owner API key: read continuationToken from GET ${gatewayUrl}/sessions/${id} ` +
      `and send PATCH ${gatewayUrl}/sessions/${id} `) +
    `with {"continuationToken": "<that token>"} (the session.paused webhook carries the same token).`
  );
}

/**
 * A thrown gateway refusal's code, status and Retry-After (the SDK client's CtlError / GatewayError), or undefined for
 * anything else.
 */
export function refusalOf(e: unknown):
  | {
      code: string;
      message: string;
      status?: number;
      retryAfterSeconds?: number;
      receiptId?: string;
      resetsAt?: string;
    }
  | undefined {
  // Only the gateway's answers: a Node system error also has a string `code` (ECONNREFUSED).
  if (!(e instanceof CtlError || e instanceof GatewayError)) return undefined;
  // A CtlError with a service code is the client's own "no answer" (src/client: the gateway was not reached).
  if (e instanceof CtlError && isServiceErrorCode(e.code)) return undefined;
  const err = e as {
    code: string;
    message: string;
    status?: unknown;
    retryAfterSeconds?: unknown;
    receiptId?: unknown;
    resetsAt?: unknown;
  };
  return {
    code: err.code,
    message: err.message,
    ...(typeof err.status === 'number' ? { status: err.status } : {}),
    ...(typeof err.retryAfterSeconds === 'number' ? { retryAfterSeconds: err.retryAfterSeconds } : {}),
    ...(typeof err.receiptId === 'string' ? { receiptId: err.receiptId } : {}),
    ...(typeof err.resetsAt === 'string' ? { resetsAt: err.resetsAt } : {}),
  };
}

/** Why the gateway could not be reached: the client's own message (it names the URL), or the host's error. */
export function unreachableMessage(e: unknown, gatewayUrl: string): string {
  if (e instanceof CtlError) return e.message;
  const cause = (e as { cause?: Error }).cause?.message;
  return `the gateway at ${gatewayUrl} could not be reached: ${(e as Error).message}${cause ? ` (${cause})` : ''}`;
}

/**
 * The structured result of a gateway refusal: `paused` (ask the owner) or `refused` (with its code).
 * @example describeRefusal({ code: 'budget_exceeded', message: '…', status: 402 }, url, id).outcome // 'refused'
 */
export function describeRefusal(
  r: NonNullable<ReturnType<typeof refusalOf>>,
  gatewayUrl: string,
  sessionId: string | undefined,
): Refusal | PauseNotice {
  if (r.code === 'session_paused') {
    // A window's pause (PROTOCOL.md §13) names its reset: waiting for it is an answer too.
    const wait = r.resetsAt
      ? ` Or wait until ${r.resetsAt}, when this budget window resets and the session resumes by itself.`
      : '';
    return {
      outcome: 'paused',
      code: 'session_paused',
      message: r.message,
      httpStatus: r.status ?? 409,
      pauseKind: r.resetsAt ? 'window' : 'ceiling',
      ...(r.resetsAt ? { resetsAt: r.resetsAt } : {}),
      ...(sessionId ? { sessionId } : {}),
      ownerAction: ownerActionForPause(gatewayUrl, sessionId),
      nextStep:
        "Nothing was paid and the merchant's paid answer was not obtained. Ask your budget " +
        'owner to approve (ownerAction says how); once they have, call paid_fetch again with ' +
        'the same arguments.' +
        wait +
        ' Do not look for another way to pay.',
    };
  }
  return {
    outcome: 'refused',
    code: r.code,
    message: r.message,
    ...(r.status !== undefined ? { httpStatus: r.status } : {}),
    ...(r.retryAfterSeconds !== undefined ? { retryAfterSeconds: r.retryAfterSeconds } : {}),
    ...(r.receiptId !== undefined ? { receiptId: r.receiptId } : {}),
    ...(r.resetsAt !== undefined ? { resetsAt: r.resetsAt } : {}),
    nextStep: NEXT_STEP[r.code] ?? 'The gateway refused the call; see code and message.',
  };
}

/**
 * A read tool's failure: the gateway's refusal with its §9 code, or the gateway being unreachable.
 * Its value is not the tool's output shape (that describes the session), so the lead says it all.
 * @example failedRead(new GatewayError(401, 'unauthorized', 'the session token is not valid'), url).value.code
 */
export function failedRead(e: unknown, gatewayUrl: string): ToolAnswer {
  const r = refusalOf(e);
  if (!r) {
    const message = unreachableMessage(e, gatewayUrl);
    return {
      value: {
        outcome: 'failed',
        code: 'unavailable',
        message,
        nextStep: 'Retry later; if it persists, tell the budget owner.',
      },
      lead: `${message} (unavailable)`,
    };
  }
  const value = describeRefusal(r, gatewayUrl, undefined);
  return {
    value: { ...value },
    lead: `Refused by the gateway (${r.code}${r.status ? `, HTTP ${r.status}` : ''}): ${r.message}. ${value.nextStep}`,
  };
}
