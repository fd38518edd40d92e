/**
 * Request validation: every bad input is `400 malformed` naming the field. Request
 * objects are closed like the artifacts (PROTOCOL.md §3): an unknown member is refused, not ignored.
 */
import { badRequest } from '../service-kit/index.js';
import { isIdentifier, parseTimestamp } from '../src/index.js';

export type Body = Record<string, unknown>;

/** The body as an object with only `allowed` members. */
export function closedObject(value: unknown, field: string, allowed: readonly string[]): Body {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw badRequest(`${field}: must be a JSON object`);
  for (const k of Object.keys(value))
    if (!allowed.includes(k)) throw badRequest(`${field}: unknown member "${k.slice(0, 64)}"`);
  return value as Body;
}

export function required(body: Body, name: string): unknown {
  if (body[name] === undefined) throw badRequest(`${name}: required`);
  if (body[name] === null) throw badRequest(`${name}: must not be null (omit it instead)`);
  return body[name];
}

export function optional(body: Body, name: string): unknown {
  if (body[name] === null) throw badRequest(`${name}: must not be null (omit it instead)`);
  return body[name];
}

export function identifier(value: unknown, field: string): string {
  if (!isIdentifier(value)) throw badRequest(`${field}: must be an identifier [A-Za-z0-9._:-]{1,128}`);
  return value;
}

/** A timestamp (PROTOCOL.md §1) strictly after `nowMs`; returns its ms. */
export function futureTimestamp(value: unknown, field: string, nowMs: number): number {
  const ms = parseTimestamp(value, field); // CtlError('malformed') naming the field
  if (ms <= nowMs) throw badRequest(`${field}: must be in the future`);
  return ms;
}

export function text(value: unknown, field: string, max: number): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > max || /[\x00-\x1f\x7f]/.test(value)) {
    throw badRequest(`${field}: must be a string of 1–${max} characters without control characters`);
  }
  return value;
}

/** A scope value of a Trust Bundle (printable ASCII without spaces, as the bundle requires). */
export function scopeValue(value: unknown, field: string, max: number): string {
  if (typeof value !== 'string' || !new RegExp(`^[\\x21-\\x7e]{1,${max}}$`).test(value)) {
    throw badRequest(`${field}: must be printable ASCII without spaces, 1–${max} characters`);
  }
  return value;
}
