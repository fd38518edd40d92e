/**
 * HTTP-level refusals that have no code in PROTOCOL.md §9. These codes are API too: add, never
 * rename. PROTOCOL.md §9 codes (`malformed`, `grant_revoked`, ...) keep their own names; these
 * cover what only a server can say (no key, wrong scope, no such route, body too large).
 */
export const HTTP_ERROR_CODES = [
  'unauthorized', // 401: no API key, unknown key, revoked key
  'forbidden', // 403: a valid key without the scope the route needs
  'not_found', // 404: unknown route or unknown resource
  'method_not_allowed', // 405
  'conflict', // 409
  'payload_too_large', // 413
  'unsupported_media_type', // 415: a body that is not JSON
  'unavailable', // 503: a dependency (database) is down
  'internal', // 500: anything unexpected; the message never carries details
] as const;

export type HttpErrorCode = (typeof HTTP_ERROR_CODES)[number];

/**
 * An error a route throws to answer with a given status and a stable code.
 * @example throw new HttpError(404, 'not_found', `no grant '${id}'`)
 */
export class HttpError extends Error {
  readonly status: number;
  readonly code: string;
  /** Response headers the refusal carries (e.g. `Retry-After` on a 429). */
  readonly headers?: Readonly<Record<string, string>>;
  constructor(status: number, code: HttpErrorCode | string, message: string, headers?: Record<string, string>) {
    super(message);
    this.name = 'HttpError';
    this.status = status;
    this.code = code;
    if (headers) this.headers = headers;
  }
}

/** `404 not_found` naming what was missing. @example throw notFound(`no policy '${h}'`) */
export const notFound = (message: string) => new HttpError(404, 'not_found', message);
/** `401 unauthorized`. */
export const unauthorized = (message = 'a valid API key is required') => new HttpError(401, 'unauthorized', message);
/** `403 forbidden`. */
export const forbidden = (message: string) => new HttpError(403, 'forbidden', message);
/** `400 malformed` naming the field, for request validation in routes (PROTOCOL.md §9 `malformed`). */
export const badRequest = (message: string) => new HttpError(400, 'malformed', message);
