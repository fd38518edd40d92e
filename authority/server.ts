/**
 * The authority's server entry: configuration → store → keys → webhooks and anchors → app →
 * listen. `createAuthority` wires without listening (two instances on one database in tests).
 */
import type Koa from 'koa';
import {
  createLogger, createWebhookDispatcher, listen, type Listening, type Logger, type WebhookDispatcher,
} from '../service-kit/index.js';
import { createAuthorityApp } from './app.js';
import { anchorsFromEnv, createAnchorQueue, type Anchor, type AnchorQueue } from './anchor.js';
import { readAuthorityConfig, type AuthorityConfig } from './config.js';
import { createKeyRing, type KeyRing } from './keys.js';
import { openAuthorityStore } from './store/open.js';
import type { AuthorityStore } from './store/types.js';

export interface Authority {
  app: Koa;
  store: AuthorityStore;
  keys: KeyRing;
  config: AuthorityConfig;
  logger: Logger;
  webhooks?: WebhookDispatcher;
  anchors: AnchorQueue;
  /** Waits for queued webhooks and anchors (tests, shutdown). */
  settle(): Promise<void>;
  close(): Promise<void>;
}

export interface CreateAuthorityOptions {
  logger?: Logger;
  logRequests?: boolean;
  now?: () => number;
  /** Anchors in addition to those the environment configures. */
  anchors?: Anchor[];
  /** PostgreSQL schema (tests). */
  schema?: string;
  fetch?: typeof fetch;
  webhookRetry?: { maxAttempts?: number; baseDelayMs?: number };
  env?: Record<string, string | undefined>;
}

/** @example const a = await createAuthority(readAuthorityConfig()); listen(a.app, { port: a.config.port }) */
export async function createAuthority(config: AuthorityConfig, options: CreateAuthorityOptions = {}): Promise<Authority> {
  const logger = options.logger ?? createLogger({ name: 'ctl-authority', level: config.logLevel });
  const now = options.now ?? Date.now;
  if (config.defaulted.length) logger.warn({ defaulted: config.defaulted }, 'development defaults in use');
  const store = await openAuthorityStore(config.databaseUrl, { schema: options.schema });
  try {
    const keys = createKeyRing({
      store, logger, now,
      grantSigningKeyPem: config.grantSigningKeyPem, grantSigningKeyId: config.grantSigningKeyId, rootSigningKeyPem: config.rootSigningKeyPem,
    });
    await keys.init();
    const webhooks = config.webhookUrls.length
      ? createWebhookDispatcher({
          endpoints: config.webhookUrls.map((url) => ({ url, secret: config.webhookSecret! })),
          log: store.dispatchLog,
          fetch: options.fetch,
          now,
          ...options.webhookRetry,
          onError: (e) => logger.error({ err: e }, 'webhook dispatch failed'),
        })
      : undefined;
    const anchors = createAnchorQueue([...anchorsFromEnv(options.env ?? process.env, logger), ...(options.anchors ?? [])], logger);
    const app = createAuthorityApp({
      store, keys, issuer: config.issuer, revocationBaseUrl: config.revocationBaseUrl, adminApiKey: config.adminApiKey,
      logger, logRequests: options.logRequests, now, webhooks, anchors,
    });
    const settle = async () => {
      await webhooks?.idle();
      await anchors.idle();
    };
    return {
      app, store, keys, config, logger, webhooks, anchors, settle,
      async close() {
        webhooks?.close();
        await settle();
        await store.close();
      },
    };
  } catch (e) {
    await store.close();
    throw e;
  }
}

/** Creates and listens; logs where. @example const { url, close } = await startAuthority(readAuthorityConfig()) */
export async function startAuthority(config: AuthorityConfig = readAuthorityConfig(), options: CreateAuthorityOptions = {}): Promise<Authority & { listening: Listening; url: string }> {
  const authority = await createAuthority(config, options);
  let listening: Listening;
  try {
    listening = await listen(authority.app, { port: config.port, host: config.host });
  } catch (e) {
    await authority.close();
    throw e;
  }
  authority.logger.info({ url: listening.url, database: authority.store.description, issuer: config.issuer }, 'policy authority listening');
  return {
    ...authority,
    listening,
    url: listening.url,
    async close() {
      await listening.close();
      await authority.close();
    },
  };
}
