import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { migrate, openDatabase } from '../../service-kit/index.js';
import { AUTHORITY_MIGRATIONS } from '../../authority/store/migrations.js';
import { createSqlAuthorityStore } from '../../authority/store/sql-store.js';
import { storeConformance } from './store-conformance.js';

// A temporary SQLite file per test (WAL mode needs a real file). No twin: a second connection in
// the same process would block the event loop in busy_timeout while the first awaits inside its
// transaction; sharing between processes is what the PostgreSQL run proves.
storeConformance('sqlite', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ctl-store-'));
  const url = `sqlite:${join(dir, 'authority.db')}`;
  const db = await openDatabase(url);
  await migrate(db, AUTHORITY_MIGRATIONS);
  const store = createSqlAuthorityStore(db);
  return {
    store,
    db,
    async cleanup() {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
