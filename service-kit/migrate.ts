/**
 * A tiny forward-only migration runner: each migration runs once, in order, inside one
 * transaction with the record of it, under a lock so two processes starting together on one
 * PostgreSQL database do not both apply it.
 */
import type { SqlDatabase } from './database.js';

export interface Migration {
  /** Unique and stable, e.g. 'authority-001-initial'. Applied in array order. */
  id: string;
  /** The SQL for each back end, or one `sql` for both. */
  sqlite?: string;
  postgres?: string;
  sql?: string;
}

/**
 * Applies the migrations not yet applied; returns the ids it applied.
 * @example await migrate(db, AUTHORITY_MIGRATIONS)
 */
export async function migrate(db: SqlDatabase, migrations: readonly Migration[]): Promise<string[]> {
  const seen = new Set<string>();
  for (const m of migrations) {
    if (seen.has(m.id)) throw new RangeError(`migrations: duplicate id '${m.id}'`);
    seen.add(m.id);
    if (!(m.sql ?? m[db.dialect])) throw new RangeError(`migration '${m.id}': no SQL for ${db.dialect}`);
  }
  return db.tx(
    async (q) => {
      await q.exec('CREATE TABLE IF NOT EXISTS ctl_migrations (id TEXT PRIMARY KEY, applied_at TEXT NOT NULL)');
      const done = new Set((await q.all<{ id: string }>('SELECT id FROM ctl_migrations')).map((r) => r.id));
      const applied: string[] = [];
      for (const m of migrations) {
        if (done.has(m.id)) continue;
        await q.exec((m.sql ?? m[db.dialect]) as string);
        await q.run('INSERT INTO ctl_migrations (id, applied_at) VALUES (?, ?)', [m.id, new Date().toISOString()]);
        applied.push(m.id);
      }
      return applied;
    },
    { lock: 'ctl_migrations' },
  );
}
