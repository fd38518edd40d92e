/**
 * An online backup of a service's database, taken while it serves (docs/operations.md "Backups").
 * SQLite: the online backup API (better-sqlite3 `backup`), a consistent copy page by page that
 * does not stop writers. PostgreSQL: `pg_dump --format=custom` (one snapshot, restored with
 * `pg_restore`); `pg_basebackup` is the tool for a whole cluster with its WAL.
 */
import Database from 'better-sqlite3';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';

/** What a backup wrote. */
export interface BackupResult {
  out: string;
  /** `sqlite` (a database file) or `pg_dump` (a custom-format archive for pg_restore). */
  format: 'sqlite' | 'pg_dump';
}

/**
 * Copies the database at `url` to `out` (which must not exist: a backup never overwrites one).
 * @example await backupDatabase('sqlite:./data/gateway.db', './backups/gateway-2026-11-29.db')
 */
export async function backupDatabase(url: string, out: string): Promise<BackupResult> {
  if (existsSync(out)) throw new RangeError(`${out} exists: a backup never overwrites a file`);
  if (url.startsWith('sqlite:')) {
    const path = url.slice('sqlite:'.length);
    if (path === '' || path === ':memory:') throw new RangeError('an in-memory database has nothing to back up');
    if (!existsSync(path)) throw new RangeError(`${path}: no such database`);
    const db = new Database(path, { fileMustExist: true });
    try {
      await db.backup(out);
    } finally {
      db.close();
    }
    return { out, format: 'sqlite' };
  }
  if (url.startsWith('postgres://') || url.startsWith('postgresql://')) {
    await run('pg_dump', ['--format=custom', '--no-owner', `--file=${out}`, `--dbname=${url}`]);
    return { out, format: 'pg_dump' };
  }
  throw new RangeError(`expected sqlite:<path> or postgres://…`);
}

function run(cmd: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', (e) => reject(new Error(`${cmd}: ${e.message}`)));
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${cmd} exited ${code}: ${err.trim()}`))));
  });
}
