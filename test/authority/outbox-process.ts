/**
 * An authority *process* for durable-events.test.ts (not a test file itself): DATABASE_URL (and
 * CTL_TEST_PG_SCHEMA), audit webhooks from CTL_AUDIT_WEBHOOK_URLS / _SECRET, retries from
 * CTL_WEBHOOK_*; prints `{ "url": … }` once listening. Meant to be SIGKILLed.
 */
import { startTestAuthority } from './harness.js';
import { webhookRetryFromEnv } from '../../service-kit/index.js';

const t = await startTestAuthority({
  databaseUrl: process.env.DATABASE_URL,
  schema: process.env.CTL_TEST_PG_SCHEMA || undefined,
  dir: process.env.CTL_TEST_DIR,
  env: {
    CTL_AUDIT_WEBHOOK_URLS: process.env.CTL_AUDIT_WEBHOOK_URLS!,
    CTL_AUDIT_WEBHOOK_SECRET: process.env.CTL_AUDIT_WEBHOOK_SECRET!,
  },
  webhookRetry: webhookRetryFromEnv(process.env),
});
console.log(JSON.stringify({ url: t.url }));
