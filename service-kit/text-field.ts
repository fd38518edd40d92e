/**
 * Optional free-text members of request bodies (labels, descriptions), read the same way in both
 * services: absent is '', `null` is refused (omit the member instead), and so are control
 * characters (U+0000–U+001F, U+007F), which no label needs and logs and terminals misread.
 */
import { badRequest } from './http-error.js';

/**
 * `body[field]` as a string of at most `max` characters, '' when absent; otherwise `400 malformed` naming the field.
 * @example const label = optionalText(body, 'label', 200)
 */
export function optionalText(body: Record<string, unknown>, field: string, max: number): string {
  const v = body[field];
  if (v === undefined) return '';
  if (v === null) throw badRequest(`${field}: must not be null (omit it instead)`);
  if (typeof v !== 'string' || v.length > max)
    throw badRequest(`${field}: must be a string of at most ${max} characters`);
  if (/[\x00-\x1f\x7f]/.test(v)) throw badRequest(`${field}: must not contain control characters`);
  return v;
}

/**
 * The body as an object whose members are all in `allowed` (an absent body is `{}`); an unknown
 * member is refused, not ignored, so nothing the caller meant is silently dropped.
 * @example const b = closedBody(ctx.request.body, ['label'])
 */
export function closedBody(value: unknown, allowed: readonly string[]): Record<string, unknown> {
  if (value === undefined) return {};
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw badRequest('body: must be a JSON object');
  for (const k of Object.keys(value)) if (!allowed.includes(k)) throw badRequest(`${k.slice(0, 64)}: unknown field`);
  return value as Record<string, unknown>;
}
