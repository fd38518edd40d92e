/**
 * PostgreSQL connections lost under load on the authority: an authority process on a database
 * of its own, grants issued, revoked, checked and bundled in parallel while every backend of the
 * database is terminated again and again. The process stays up, every answer is a success or
 * `503 unavailable` (never a 500), and once the database is back it issues again.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { fork } from 'node:child_process';
import { generateKeyPair } from '../../src/index.js';
import { ADMIN_KEY } from './harness.js';
import { freshDatabase, freshSchema, pgAvailable, terminateBackends, PG_URL } from '../service-kit/pg-fixture.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test(
  'an authority process, every PostgreSQL backend terminated under load: it stays up, ' +
    '2xx or 503 only, and issues once the database is back',
  async () => {
    if (!(await pgAvailable())) {
      console.log(`SKIPPED authority connection loss: PostgreSQL at ${PG_URL} is unreachable`);
      return;
    }
    const database = await freshDatabase();
    const child = fork(new URL('./loss-process.js', import.meta.url), [database.url, freshSchema()], {
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    });
    let stderr = '';
    let crashed: string | undefined;
    child.stderr!.on('data', (d) => (stderr += d));
    child.on('exit', (code, signal) => (crashed ??= `exited ${code ?? signal}`));
    try {
      const { url } = await new Promise<{ url: string }>((resolve, reject) => {
        child.once('message', (m) => resolve(m as { url: string }));
        child.once('exit', () => reject(new Error(`authority process exited at start: ${stderr}`)));
      });
      const send = async (method: string, path: string, body?: unknown) => {
        const res = await fetch(url + path, {
          method,
          headers: { authorization: `Bearer ${ADMIN_KEY}`, ...(body ? { 'content-type': 'application/json' } : {}) },
          body: body ? JSON.stringify(body) : undefined,
        });
        const text = await res.text();
        let code: string | undefined;
        try {
          code = JSON.parse(text).error?.code;
        } catch {}
        return { status: res.status, code, body: text };
      };
      const policy = JSON.parse((await send('POST', '/policies', { policy: { fleet: 'loss' } })).body)
        .policyHash as string;
      const wallet = await generateKeyPair({ alg: 'EdDSA' });
      const grantBody = () => ({
        policyHash: policy,
        actorKey: wallet.publicJwk,
        allowedRails: ['x402'],
        allowedAssets: [{ standard: 'iso4217', code: 'USD' }],
        maxAmountMinor: '5000',
        currency: 'USD',
        expiresAt: new Date(Date.now() + 3600_000).toISOString(),
      });

      const statuses = new Map<string, number>();
      const count = (r: { status: number; code?: string }) => {
        const k = r.status < 300 ? String(r.status) : `${r.status} ${r.code}`;
        statuses.set(k, (statuses.get(k) ?? 0) + 1);
      };
      let running = true;
      const workers = Array.from({ length: 8 }, async (_, w) => {
        while (running) {
          const issued = await send('POST', '/grants', grantBody()).catch((e: Error) => ({
            status: 0,
            code: e.message,
            body: '',
          }));
          count(issued);
          if (issued.status !== 201) continue;
          const grantId = JSON.parse(issued.body).grantId as string;
          count(await send('GET', `/revoke?grantId=${grantId}`).catch((e: Error) => ({ status: 0, code: e.message })));
          if (w % 2 === 0)
            count(await send('POST', '/revoke', { grantId }).catch((e: Error) => ({ status: 0, code: e.message })));
          if (w % 4 === 1)
            count(
              await send('POST', '/trust-bundles', {
                scope: {},
                expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
              }).catch((e: Error) => ({ status: 0, code: e.message })),
            );
        }
      });
      let terminated = 0;
      let busy = 0;
      await sleep(400);
      for (let round = 0; round < 6; round++) {
        const cut = await terminateBackends(database.url);
        terminated += cut.ended;
        busy += cut.busy;
        await sleep(300 + Math.random() * 300);
      }
      await sleep(300);
      running = false;
      await Promise.all(workers);

      const summary = [...statuses].map(([k, v]) => `${k}: ${v}`).join(', ');
      if (process.env.CTL_TEST_VERBOSE) console.log(`authority answers under connection loss: ${summary}`);
      assert.is(crashed, undefined, `the authority process died: ${stderr.slice(-2000)}`);
      assert.ok(terminated >= 6, `backends were terminated (${terminated})`);
      const wrong = [...statuses.keys()].filter((k) => !/^2\d\d$/.test(k) && k !== '503 unavailable');
      assert.equal(wrong, [], `answers other than 2xx and 503 unavailable: ${summary}`);
      assert.ok(busy > 0, `connections were cut while busy (${busy} of ${terminated}): ${summary}`);

      // The database is back: the next grant is issued.
      let after = await send('POST', '/grants', grantBody());
      for (
        const end = Date.now() + 10_000;
        after.status === 503 && Date.now() < end;
        after = await send('POST', '/grants', grantBody())
      )
        await sleep(100);
      assert.is(after.status, 201, after.body);
    } finally {
      if (child.exitCode === null && child.signalCode === null) {
        crashed = '';
        child.send('stop');
        await new Promise((r) => child.once('exit', r));
      }
      await database.drop();
    }
  },
);

test.run();
