/**
 * The webhook deliveries of one session, read from the dispatch log (`gw_webhook_dispatches`,
 * service-kit's table). The log has no session column: a session's deliveries are the ones to its
 * `webhookUrl` whose body names its id; the LIKE narrows, the parsed body decides.
 */
import type { SqlExecutor } from '../../service-kit/index.js';

export interface SessionDispatch {
  id: string;
  messageId: string;
  eventType: string;
  status: string;
  attempts: number;
  lastStatus: number | null;
  lastError: string | null;
  createdAt: string;
  updatedAt: string;
}

/** Newest first, at most `limit`. @example await dispatchesOfSession(db, s.id, s.webhookUrl, 100) */
export async function dispatchesOfSession(
  q: SqlExecutor,
  sessionId: string,
  webhookUrl: string,
  limit: number,
): Promise<SessionDispatch[]> {
  // Session ids are [A-Za-z0-9_-]: escape LIKE's `_` (and the escape character itself).
  const needle = `%"sessionId":"${sessionId.replace(/[\\%_]/g, (c) => `\\${c}`)}"%`;
  const rows = await q.all<Record<string, unknown>>(
    `SELECT id, message_id, event_type, body, status, attempts, last_status, last_error, created_at, updated_at
     FROM gw_webhook_dispatches WHERE endpoint = ? AND body LIKE ? ESCAPE '\\' ORDER BY created_at DESC,
     id DESC LIMIT ?`,
    [webhookUrl, needle, limit],
  );
  return rows
    .filter((r) => {
      try {
        return (JSON.parse(r.body as string) as { data?: { sessionId?: unknown } }).data?.sessionId === sessionId;
      } catch {
        return false;
      }
    })
    .map((r) => ({
      id: r.id as string,
      messageId: r.message_id as string,
      eventType: r.event_type as string,
      status: r.status as string,
      attempts: Number(r.attempts),
      lastStatus: r.last_status == null ? null : Number(r.last_status),
      lastError: (r.last_error as string | null) ?? null,
      createdAt: r.created_at as string,
      updatedAt: r.updated_at as string,
    }));
}
