/**
 * A second authority *process* for two-processes-postgres.test.ts (not a test file itself):
 * `node authority-process.js <schema>` starts an authority on that PostgreSQL schema, waits until
 * its revocation cache follows the database, sends `{ url }` over IPC, and stops on 'stop'.
 */
import { startTestAuthority } from './harness.js';
import { PG_URL } from '../service-kit/pg-fixture.js';

const t = await startTestAuthority({ databaseUrl: PG_URL, schema: process.argv[2] });
const deadline = Date.now() + 10_000;
while (!t.authority.store.revocationCache.live && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
process.send!({ url: t.url, live: t.authority.store.revocationCache.live });
process.on('message', async (m) => {
  if (m === 'size') process.send!({ size: t.authority.store.revocationCache.size });
  if (m === 'stop') {
    await t.close();
    process.exit(0);
  }
});
