/**
 * Error codes are API (PROTOCOL.md §9): add, never rename.
 */
/**
 * The service codes the gateway and authority answer with (PROTOCOL.md §9, second list): they
 * refuse a request (auth, routing, the upstream merchant), not an artifact.
 */
export const SERVICE_ERROR_CODES = [
  'unauthorized',
  'forbidden',
  'not_found',
  'method_not_allowed',
  'conflict',
  'payload_too_large',
  'unsupported_media_type',
  'unavailable',
  'internal',
  'upstream_error',
  'upstream_timeout',
  'payment_failed',
  'payment_unconfirmed',
  // A payment made and committed (its receipt named in X-Ctl-Receipt-Id) whose merchant answer
  // was lost: sending the request again pays again (gateway/README.md "Errors").
  'paid_response_lost',
] as const;

export const ERROR_CODES = [
  'malformed',
  'unsupported_version',
  'grant_signature_invalid',
  'grant_expired',
  'grant_revoked',
  'sba_signature_invalid',
  'sba_expired',
  'not_yet_valid',
  'unknown_key',
  'key_purpose_mismatch',
  'issuer_not_trusted',
  'policy_hash_mismatch',
  'currency_mismatch',
  'amount_exceeds_authorization',
  'budget_exceeded',
  'rail_not_allowed',
  'asset_not_allowed',
  'purpose_not_allowed',
  'destination_not_allowed',
  'replay',
  'velocity_exceeded',
  'offline_limit_exceeded',
  'revocation_unavailable',
  'trust_bundle_invalid',
  'trust_bundle_expired',
  'trust_bundle_rollback',
  'session_paused',
  'session_revoked',
  'session_expired',
  'continuation_invalid',
  'target_not_allowed',
  'payment_terms_refused',
  'receipt_signature_invalid',
  'unsupported_algorithm',
  'root_rotation_invalid',
  'root_rollback',
  'rate_limited',
  // PROTOCOL.md §16
  'window_exceeded',
  'delegation_invalid',
  'capture_exceeds_hold',
  'hold_expired',
  'unsupported_feature',
  // Transparency logs (docs/sdk-api.md "Transparency log"; RFC 9162, C2SP tlog-checkpoint):
  // a proof that does not lead to the root, two signed trees that cannot both be true (a split
  // view or a rewritten history), a checkpoint without a valid signature of a trusted log key,
  // fewer valid witness cosignatures than required, a checkpoint of another log.
  'log_proof_invalid',
  'log_inconsistent',
  'checkpoint_signature_invalid',
  'checkpoint_cosignatures_insufficient',
  'checkpoint_origin_mismatch',
  ...SERVICE_ERROR_CODES,
] as const;

export type CtlErrorCode = (typeof ERROR_CODES)[number];

/** The failure half of every verification result: `{ valid: false, error }`. */
export interface CtlErrorInfo {
  code: CtlErrorCode;
  message: string;
  /** With `window_exceeded`: when the full window ends and the next one starts (PROTOCOL.md §13). */
  resetsAt?: string;
}

/**
 * An error with a stable code from PROTOCOL.md §9.
 * @example
 *   try { parseGrant(text) } catch (e) { if (e instanceof CtlError) console.log(e.code) }
 */
export class CtlError extends Error {
  readonly code: CtlErrorCode;
  /** With `window_exceeded`: the start of the next window (PROTOCOL.md §13). */
  readonly resetsAt?: string;
  constructor(code: CtlErrorCode, message: string, details?: { resetsAt?: string }) {
    super(message);
    this.name = 'CtlError';
    this.code = code;
    if (details?.resetsAt !== undefined) this.resetsAt = details.resetsAt;
  }
  toJSON(): CtlErrorInfo {
    return {
      code: this.code,
      message: this.message,
      ...(this.resetsAt !== undefined ? { resetsAt: this.resetsAt } : {}),
    };
  }
}

/** Thrown by `session.createSba` when the payment would pass the ceiling (spec §7). */
export class CtlBudgetExceededError extends CtlError {
  constructor(message = 'amount would exceed the budget ceiling') {
    super('budget_exceeded', message);
    this.name = 'CtlBudgetExceededError';
  }
}

/** Thrown by `session.createSba` once the grant is revoked; terminal for the session (spec §7). */
export class CtlGrantRevokedError extends CtlError {
  constructor(message = 'the grant has been revoked') {
    super('grant_revoked', message);
    this.name = 'CtlGrantRevokedError';
  }
}

/** True when `value` is one of the service codes of PROTOCOL.md §9 (a refused request, not an artifact). */
export function isServiceErrorCode(value: unknown): boolean {
  return typeof value === 'string' && (SERVICE_ERROR_CODES as readonly string[]).includes(value);
}

/** True when `value` is one of the codes of PROTOCOL.md §9. */
export function isCtlErrorCode(value: unknown): value is CtlErrorCode {
  return typeof value === 'string' && (ERROR_CODES as readonly string[]).includes(value);
}

/**
 * Throws a CtlError: one call instead of a `throw new` at each refusal. @example if (!ok) fail('grant_expired', 'the
 * grant expired')
 */
export function fail(code: CtlErrorCode, message: string): never {
  throw new CtlError(code, message);
}

/** Shorthand used by parsers: throw a `malformed` CtlError. */
export function malformed(message: string): never {
  fail('malformed', message);
}

/**
 * Turns anything thrown into the `{ code, message }` of a refusal, never leaking a stack and
 * never throwing itself: hostile input can throw revoked Proxies, objects without a prototype,
 * or errors whose `message` getter throws.
 */
export function toErrorInfo(e: unknown, fallback: CtlErrorCode = 'malformed'): CtlErrorInfo {
  try {
    if (e instanceof CtlError) return e.toJSON();
  } catch {
    // `instanceof` on a revoked Proxy throws: not ours, then.
  }
  let message = 'invalid input';
  try {
    if (typeof e === 'string') message = e;
    else if (e instanceof Error && typeof e.message === 'string') message = e.message;
  } catch {
    // a throwing getter or trap: keep the generic message
  }
  return { code: fallback, message: message.slice(0, 512) };
}
