/**
 * How a session token is kept: only its SHA-256 is stored (gw_sessions.token_hash), so a read of
 * the database gives no agent's token away.
 */
import { createHash } from 'node:crypto';

/**
 * The stored form of a session token: its SHA-256, in hex.
 * @example hashToken('gw_sess_abc') // 'a1b2…' (64 hex digits)
 */
export const hashToken = (token: string) => createHash('sha256').update(token, 'utf8').digest('hex');
