/**
 * Revocation across real processes: authority A in this process, authority B in a child process,
 * one PostgreSQL schema. B answers GET /revoke from its cache; a revocation answered by A must be
 * answered as revoked by B at B's very next check (the in-process twin tests share one LISTEN
 * connection, so only this file exercises two listeners and the notification's trip between them).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { fork, type ChildProcess } from 'node:child_process';
import { generateKeyPair } from '../../src/index.js';
import { grantRequest, startTestAuthority, type TestAuthority } from './harness.js';
import { PG_URL, dropSchema, freshSchema, pgAvailable } from '../service-kit/pg-fixture.js';

const available = await pgAvailable();
const schema = freshSchema();
let a: TestAuthority;
let child: ChildProcess;
let bUrl: string;

async function until(ok: () => boolean | Promise<boolean>): Promise<void> {
  for (const end = Date.now() + 5000; !(await ok()); ) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 5));
  }
}
const onB = async (id: string) => {
  const res = await fetch(`${bUrl}/revoke?grantId=${id}`);
  return { status: res.status, revoked: ((await res.json()) as { revoked?: boolean }).revoked };
};
const ask = (m: string) => new Promise<any>((r) => (child.once('message', r), child.send(m)));

if (!available) {
  console.log(`SKIPPED two authority processes on one PostgreSQL: ${PG_URL} is unreachable`);
} else {
  test.before(async () => {
    a = await startTestAuthority({ databaseUrl: PG_URL, schema });
    child = fork(new URL('./authority-process.js', import.meta.url), [schema], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    const hello = await new Promise<{ url: string; live: boolean }>((resolve, reject) => {
      child.once('message', (m) => resolve(m as { url: string; live: boolean }));
      child.once('exit', (code) => reject(new Error(`authority process exited ${code}`)));
    });
    assert.ok(hello.live, 'B follows the database');
    bUrl = hello.url;
    await until(() => a.authority.store.revocationCache.live);
  });
  test.after(async () => {
    if (child?.connected) {
      child.send('stop');
      await new Promise((r) => child.once('exit', r));
    }
    await a?.close();
    await dropSchema(schema);
  });

  test('revoked on A, revoked on B at its next check, 50 times (B answering from its cache until then)', async () => {
    const wallet = await generateKeyPair({ alg: 'EdDSA' });
    const body = await grantRequest(a, wallet.publicJwk);
    for (let i = 0; i < 50; i++) {
      const id = (await a.call('POST', '/grants', body)).body.grantId as string;
      await until(async () => (await onB(id)).status === 200);
      assert.is((await onB(id)).revoked, false);
      assert.is((await onB(id)).revoked, false);
      assert.is((await a.call('POST', '/revoke', { grantId: id })).status, 200);
      assert.is((await onB(id)).revoked, true, `check ${i}`);
    }
    assert.ok((await ask('size')).size >= 50, 'B cached what it answered');
  });

  test('under a stream of checks on B, every check that starts after A answered the revocation says revoked', async () => {
    const wallet = await generateKeyPair({ alg: 'EdDSA' });
    for (let round = 0; round < 5; round++) {
      const id = (await a.call('POST', '/grants', await grantRequest(a, wallet.publicJwk))).body.grantId as string;
      await until(async () => (await onB(id)).revoked === false);
      let answered = false;
      let stop = false;
      const late: boolean[] = [];
      const loops = Array.from({ length: 8 }, async () => {
        while (!stop) {
          const after = answered;
          const { revoked } = await onB(id);
          if (after) late.push(revoked === true);
        }
      });
      await new Promise((r) => setTimeout(r, 30));
      assert.is((await a.call('POST', '/revoke', { grantId: id })).status, 200);
      answered = true;
      await new Promise((r) => setTimeout(r, 60));
      stop = true;
      await Promise.all(loops);
      assert.ok(late.length > 8);
      assert.ok(late.every(Boolean), `round ${round}: ${late.filter((x) => !x).length} of ${late.length} late checks said not revoked`);
    }
  });
}

test.run();
