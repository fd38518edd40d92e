/**
 * What a lost database connection looks like, and the error it becomes (PROTOCOL.md §9
 * `unavailable`): the database layer wraps it (database.ts), and the error middleware
 * recognises one that reached it another way.
 */
import { HttpError } from './http-error.js';

/**
 * A statement that failed because the database could not be reached or its connection was lost
 * (a restart, a failover, a terminated backend, an idle timeout, a proxy): `503 unavailable`
 * (PROTOCOL.md §9), the world rather than a bug here. `cause` is the driver's error. Whether a
 * write in flight was committed is unknown to the caller, as for any failed COMMIT.
 */
export class DatabaseUnavailableError extends HttpError {
  constructor(cause: unknown) {
    super(503, 'unavailable', 'the database is unavailable', { 'Retry-After': '1' });
    this.name = 'DatabaseUnavailableError';
    (this as { cause?: unknown }).cause = cause;
  }
}

/**
 * SQLSTATEs that mean the connection, not the statement, failed: class 08 (connection
 * exception), 57P01–57P03 (administrator or crash shutdown, cannot connect now), 53300 (too
 * many connections) and 25P03 (idle-in-transaction timeout, which ends the connection).
 */
const LOST_SQLSTATE = /^(08...|57P0[1-3]|53300|25P03)$/;
/** Socket errors of a connection that could not be made or was cut. */
const LOST_ERRNO = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ECONNABORTED',
]);
/** pg's own errors for a lost, closed or never-made connection carry no code, only these messages. */
const LOST_MESSAGE = new RegExp(
  '^(' +
    [
      'Connection terminated',
      'Client has encountered a connection error',
      'Client was closed and is not queryable',
      'timeout exceeded when trying to connect',
      'Query read timeout',
      'Cannot use a pool after calling end',
    ].join('|') +
    ')',
);

/**
 * true when `e` says the connection to PostgreSQL failed rather than the statement itself.
 * Socket errors count only when `e` is known to come from the driver (`fromDriver`): elsewhere an
 * ECONNRESET may be a merchant's or a webhook's.
 */
export function isConnectionLoss(e: unknown, fromDriver = true): boolean {
  if (e instanceof DatabaseUnavailableError) return true;
  if (!(e instanceof Error)) return false;
  const any = e as { code?: unknown; severity?: unknown };
  if (typeof any.code === 'string') {
    // A SQLSTATE comes with the server's severity (pg's DatabaseError).
    if (LOST_SQLSTATE.test(any.code) && (fromDriver || typeof any.severity === 'string')) return true;
    if (fromDriver && LOST_ERRNO.has(any.code)) return true;
  }
  return LOST_MESSAGE.test(e.message);
}
