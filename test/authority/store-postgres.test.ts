import { test } from 'uvu';
import { migrate, openDatabase } from '../../service-kit/index.js';
import { AUTHORITY_MIGRATIONS } from '../../authority/store/migrations.js';
import { createSqlAuthorityStore } from '../../authority/store/sql-store.js';
import { storeConformance } from './store-conformance.js';
import { PG_URL, dropSchema, freshSchema, pgAvailable } from '../service-kit/pg-fixture.js';

if (await pgAvailable()) {
  // A fresh schema per test; the twin is a second pool on the same schema (a second process).
  storeConformance('postgres', async () => {
    const schema = freshSchema();
    const db = await openDatabase(PG_URL, { schema });
    await migrate(db, AUTHORITY_MIGRATIONS);
    const store = createSqlAuthorityStore(db);
    return {
      store,
      db,
      openTwin: async () => {
        const db2 = await openDatabase(PG_URL, { schema });
        await migrate(db2, AUTHORITY_MIGRATIONS);
        return createSqlAuthorityStore(db2);
      },
      async cleanup() {
        await store.close();
        await dropSchema(schema);
      },
    };
  });
} else {
  console.log(`SKIPPED store conformance on PostgreSQL: ${PG_URL} is unreachable`);
  test.run();
}
