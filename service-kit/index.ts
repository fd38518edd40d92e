/**
 * service-kit: the Koa helpers both services (authority/, gateway/) import. See README.md.
 */
export { HttpError, HTTP_ERROR_CODES, notFound, unauthorized, forbidden, badRequest, type HttpErrorCode } from './http-error.js';
export { errorMiddleware, describeError, DEFAULT_STATUS_BY_CODE, type ErrorMiddlewareOptions, type ErrorBody } from './error-middleware.js';
export { jsonBody, type JsonBodyOptions } from './json-body.js';
export {
  ADMIN_SCOPE, hashApiKey, generateApiKey, apiKeyId, apiKeyMatches, createApiKeyAuth, bearerToken, requireScope,
  type ApiKeyRecord, type Principal, type ApiKeyAuthOptions, type Authenticate,
} from './api-keys.js';
export { createLogger, silentLogger, requestLogger, type Logger } from './logger.js';
export { createMetrics, type Metrics } from './metrics.js';
export { openDatabase, type SqlDatabase, type SqlExecutor, type Dialect, type Row, type OpenOptions } from './database.js';
export { migrate, type Migration } from './migrate.js';
export {
  createAuditLog, auditLogMigration, auditEntryHash, checkTableName, AUDIT_GENESIS_HASH,
  type AuditLog, type AuditEntry, type AuditInput,
} from './audit-log.js';
export { signWebhook, verifyWebhook, generateWebhookSecret, type WebhookHeaders } from './webhook-signature.js';
export {
  createWebhookDispatcher, createSqlDispatchLog, dispatchLogMigration,
  type WebhookDispatcher, type WebhookDispatcherOptions, type WebhookEndpoint, type DispatchLog, type DispatchRecord, type DispatchStatus,
} from './webhook-dispatcher.js';
export { listen, type Listening } from './listen.js';
