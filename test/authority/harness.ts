/**
 * Starts the real authority (createAuthority: real store, keys, audit) on a temporary SQLite
 * file, or on a PostgreSQL schema, listening on 127.0.0.1 port 0. The server listens before the
 * app exists so grants can carry the real revocation URL.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readAuthorityConfig } from '../../authority/config.js';
import { createAuthority, type Authority, type CreateAuthorityOptions } from '../../authority/server.js';
import { answerClientError, silentLogger } from '../../service-kit/index.js';
import { AUTHORITY_OPENAPI } from '../../authority/openapi.js';
import { compileOpenApi, expectMatchesOpenApi } from '../helpers/openapi.js';

compileOpenApi(AUTHORITY_OPENAPI);

export const ADMIN_KEY = 'test-admin-key-0123456789';

export interface TestAuthority {
  url: string;
  authority: Authority;
  dir: string;
  /**
   * fetch + JSON: `{ status, body, headers }`, checked against authority/openapi.json; `key` defaults to the admin key
   * (`null` sends none).
   */
  call(
    method: string,
    path: string,
    body?: unknown,
    key?: string | null,
    headers?: Record<string, string>,
  ): Promise<{ status: number; body: any; headers: Headers }>;
  close(): Promise<void>;
}

export async function startTestAuthority(
  options: {
    env?: Record<string, string>;
    databaseUrl?: string;
    dir?: string;
    keepDir?: boolean;
  } & CreateAuthorityOptions = {},
): Promise<TestAuthority> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'ctl-authority-'));
  let authority: Authority;
  try {
    const config = readAuthorityConfig({
      PORT: '0',
      DATABASE_URL: options.databaseUrl ?? `sqlite:${join(dir, 'authority.db')}`,
      CTL_ISSUER_DOMAIN: 'authority.test',
      CTL_REVOCATION_BASE_URL: url,
      CTL_ADMIN_API_KEY: ADMIN_KEY,
      ...options.env,
    });
    authority = await createAuthority(config, { logger: silentLogger(), env: {}, ...options });
  } catch (e) {
    // A refused start (its configuration included) must not leave the listening server (and the test process) running.
    await new Promise<void>((r) => server.close(() => r()));
    if (!options.keepDir && !options.dir) rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  server.on('request', authority.app.callback());
  server.on('clientError', answerClientError); // as listen() does in production
  return {
    url,
    authority,
    dir,
    async call(method, path, body, key = ADMIN_KEY, headers = {}) {
      const h: Record<string, string> = { ...headers };
      if (key !== null) h['authorization'] = `Bearer ${key}`;
      let payload: string | undefined;
      if (body !== undefined) {
        payload = typeof body === 'string' ? body : JSON.stringify(body);
        h['content-type'] ??= 'application/json';
      }
      const res = await fetch(url + path, { method, headers: h, body: payload });
      const text = await res.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        /* not JSON: keep the text */
      }
      // Every answer a test receives is checked against the published document.
      expectMatchesOpenApi(
        AUTHORITY_OPENAPI,
        method,
        path,
        res.status,
        parsed,
        res.headers.get('content-type'),
        typeof body === 'object' && body !== null ? { body } : undefined,
      );
      return { status: res.status, body: parsed, headers: res.headers };
    },
    async close() {
      await new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      });
      await authority.close();
      if (!options.keepDir && !options.dir) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A stored policy and the body of a valid grant request for a fresh wallet key. */
export async function grantRequest(t: TestAuthority, actorJwk: object, over: Record<string, unknown> = {}) {
  const p = await t.call('POST', '/policies', { policy: { fleet: 'test', note: Math.random().toString(36) } });
  return {
    policyHash: p.body.policyHash,
    actorKey: actorJwk,
    allowedRails: ['x402'],
    allowedAssets: [{ standard: 'iso4217', code: 'USD' }],
    maxAmountMinor: '5000',
    currency: 'USD',
    expiresAt: new Date(Date.now() + 3600_000).toISOString(),
    ...over,
  };
}
