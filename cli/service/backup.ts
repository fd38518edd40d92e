/**
 * `ctl gateway backup --out FILE` / `ctl authority backup --out FILE`: an online backup of the
 * service's DATABASE_URL while it runs (service-kit/backup.ts; docs/operations.md "Backups").
 * The keys in it stay sealed: a restore needs the same KEK, kept apart from the backup.
 */
import { parseArgs, required, UsageError } from '../device/args.js';

export const backupUsage = (program: string, defaultUrl: string) => `usage: ${program} backup --out FILE

  an online backup of DATABASE_URL (default ${defaultUrl}) to FILE, which must not exist:
  SQLite: a database file (the online backup API; restore by copying it into place);
  PostgreSQL: a pg_dump custom archive (restore with pg_restore --no-owner -d URL FILE)`;

export async function backupCommand(program: string, args: string[], defaultUrl: string): Promise<number> {
  const p = parseArgs(args, { values: ['out'] });
  if (p.positionals.length) throw new UsageError(`unexpected argument ${p.positionals[0]}`);
  const out = required(p, 'out');
  const url = process.env.DATABASE_URL || defaultUrl;
  const { backupDatabase } = await import('../../service-kit/backup.js');
  try {
    const r = await backupDatabase(url, out);
    console.error(`${program} backup: wrote ${r.out} (${r.format})`);
    return 0;
  } catch (e) {
    console.error(`${program} backup: ${(e as Error).message}`);
    return 1;
  }
}
