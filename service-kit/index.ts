/**
 * service-kit: the Koa helpers both services (authority/, gateway/) import. See README.md.
 */
export {
  HttpError,
  HTTP_ERROR_CODES,
  notFound,
  unauthorized,
  forbidden,
  badRequest,
  type HttpErrorCode,
} from './http-error.js';
export {
  errorMiddleware,
  describeError,
  DEFAULT_STATUS_BY_CODE,
  type ErrorMiddlewareOptions,
  type ErrorBody,
} from './error-middleware.js';
export { jsonBody, type JsonBodyOptions } from './json-body.js';
export { optionalText, closedBody } from './text-field.js';
export { requestGuard, readsBody, hasBody, READS_BODY } from './request-guard.js';
export {
  ADMIN_SCOPE,
  hashApiKey,
  generateApiKey,
  apiKeyId,
  apiKeyMatches,
  createApiKeyAuth,
  bearerToken,
  requireScope,
  type ApiKeyRecord,
  type Principal,
  type ApiKeyAuthOptions,
  type Authenticate,
} from './api-keys.js';
export { createLogger, silentLogger, requestLogger, type Logger } from './logger.js';
export { createMetrics, defaultMetricsOn, type Metrics } from './metrics.js';
export {
  openDatabase,
  type SqlDatabase,
  type SqlExecutor,
  type Dialect,
  type Row,
  type OpenOptions,
} from './database.js';
export { isConnectionLoss, DatabaseUnavailableError } from './connection-loss.js';
export { parsePostgresUrl, createHostRotation, NotReadWriteError, type PgTarget, type PgHost } from './pg-hosts.js';
export type { FlushFile } from './wal-flush.js';
export { randomId, timeOrderedId } from './random-id.js';
export { idleCache, type IdleCache } from './idle-cache.js';
export { migrate, type Migration } from './migrate.js';
export {
  createAuditLog,
  auditLogMigration,
  auditStagingMigration,
  auditEntryHash,
  checkTableName,
  AUDIT_GENESIS_HASH,
  type AuditLog,
  type AuditEntry,
  type AuditInput,
} from './audit-log.js';
export { signWebhook, verifyWebhook, generateWebhookSecret, type WebhookHeaders } from './webhook-signature.js';
export {
  createWebhookOutbox,
  createSqlDispatchLog,
  dispatchLogMigration,
  webhookOutboxMigration,
  webhookRetryFromEnv,
  type WebhookOutbox,
  type WebhookOutboxOptions,
  type WebhookRetrySettings,
  type OutboxEndpoint,
  type OutboxEvent,
  type DeliveryOutcome,
  type DispatchLog,
  type DispatchRecord,
  type DispatchStatus,
} from './webhook-outbox.js';
export { changeWith, allEffects, Rollback, type TxEffect } from './tx-effect.js';
export { insertRow, insertSelectSql, type RowInsert } from './row-insert.js';
export { listen, answerClientError, type Listening } from './listen.js';
export {
  createLimiter,
  rateLimit,
  limitAuthenticate,
  parseRateLimit,
  formatRateLimit,
  rateLimited,
  RATE_LIMIT_TABLE,
  type RateLimit,
  type Limiter,
  type LimiterOptions,
  type RateLimitBackend,
} from './rate-limit.js';
export {
  ConfigError,
  LOG_LEVELS,
  checkLogLevel,
  checkDatabaseUrl,
  checkHttpUrl,
  checkHostPortList,
  checkAdminKey,
  checkKek,
  checkDatabaseReachable,
  redactUrl,
} from './config.js';
export { canonicalHost, canonicalUrlHost } from './host-name.js';
