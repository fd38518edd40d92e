/**
 * Opens the authority store from a database URL: the SQLite implementation for `sqlite:…`, the
 * PostgreSQL one for `postgres://…`; both migrate on open.
 */
import { migrate, openDatabase, type OpenOptions } from '../../service-kit/index.js';
import { AUTHORITY_MIGRATIONS } from './migrations.js';
import { createSqlAuthorityStore } from './sql-store.js';
import type { AuthorityStore } from './types.js';

/** SQLite (better-sqlite3, WAL). @example await createSqliteAuthorityStore('./data/authority.db') */
export async function createSqliteAuthorityStore(path: string): Promise<AuthorityStore> {
  const db = await openDatabase(`sqlite:${path}`);
  await migrate(db, AUTHORITY_MIGRATIONS);
  return createSqlAuthorityStore(db);
}

/** PostgreSQL (pg Pool). @example await createPostgresAuthorityStore('postgres://u@h/db', { schema: 'ctl' }) */
export async function createPostgresAuthorityStore(url: string, options: OpenOptions = {}): Promise<AuthorityStore> {
  const db = await openDatabase(url, options);
  try {
    await migrate(db, AUTHORITY_MIGRATIONS);
  } catch (e) {
    await db.close();
    throw e;
  }
  return createSqlAuthorityStore(db);
}

/** By URL. @example await openAuthorityStore(process.env.DATABASE_URL ?? 'sqlite:./data/authority.db') */
export function openAuthorityStore(url: string, options: OpenOptions = {}): Promise<AuthorityStore> {
  if (url.startsWith('sqlite:')) return createSqliteAuthorityStore(url.slice('sqlite:'.length));
  if (/^postgres(ql)?:\/\//.test(url)) return createPostgresAuthorityStore(url, options);
  throw new RangeError(`DATABASE_URL: expected sqlite:<path> or postgres://…`);
}
