/**
 * The real policy authority (authority/), started in-process on a temporary SQLite file and
 * 127.0.0.1 port 0, with the fleet's root key: what the examples talk to instead of a hosted one.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readAuthorityConfig } from '../../authority/config.js';
import { createAuthority } from '../../authority/server.js';
import { silentLogger } from '../../service-kit/index.js';

const ADMIN = 'example-admin-key-0123456789';

export interface LocalAuthority {
  url: string;
  /** JSON call with the admin key; throws on a non-2xx answer. */
  call(method: string, path: string, body?: unknown): Promise<any>;
  /** Stops answering (the device is offline from here on). */
  close(): Promise<void>;
}

export async function startLocalAuthority(
  rootPrivateKeyPem: string,
  issuer = 'authority.fleet.example',
): Promise<LocalAuthority> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const dir = mkdtempSync(join(tmpdir(), 'ctl-example-authority-'));
  const config = readAuthorityConfig({
    PORT: '0',
    DATABASE_URL: `sqlite:${join(dir, 'authority.db')}`,
    CTL_ISSUER_DOMAIN: issuer,
    CTL_REVOCATION_BASE_URL: url,
    CTL_ADMIN_API_KEY: ADMIN,
    CTL_TRUST_BUNDLE_ROOT_PRIVATE_KEY_PEM: rootPrivateKeyPem,
  });
  const authority = await createAuthority(config, { logger: silentLogger(), env: {} });
  server.on('request', authority.app.callback());
  let open = true;
  return {
    url,
    async call(method, path, body) {
      const res = await fetch(url + path, {
        method,
        headers: { authorization: `Bearer ${ADMIN}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
      return JSON.parse(text);
    },
    async close() {
      if (!open) return;
      open = false;
      await new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      });
      await authority.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Prints a step and stops the example (exit 1) when an expectation fails, so CI notices. */
export function expect(cond: unknown, what: string): void {
  if (!cond) {
    console.error(`EXPECTATION FAILED: ${what}`);
    process.exit(1);
  }
}
