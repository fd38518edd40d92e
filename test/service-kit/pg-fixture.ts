/**
 * PostgreSQL for tests: each run gets its own schema (test files run in parallel), dropped after.
 * When the server is unreachable the caller prints a line starting with SKIPPED (CI starts it).
 */
import pg from 'pg';
import { randomBytes } from 'node:crypto';

export const PG_URL = process.env.CTL_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** true when a connection succeeds within two seconds. */
export async function pgAvailable(): Promise<boolean> {
  const c = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 2000 });
  try {
    await c.connect();
    await c.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await c.end().catch(() => {});
  }
}

/** A schema name nobody else uses: `ctl_t_<random>`. */
export function freshSchema(): string {
  return `ctl_t_${randomBytes(8).toString('hex')}`;
}

export async function dropSchema(schema: string): Promise<void> {
  if (!/^ctl_t_[0-9a-f]{16}$/.test(schema)) throw new RangeError(`refusing to drop '${schema}'`);
  const c = new pg.Client({ connectionString: PG_URL });
  await c.connect();
  try {
    await c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  } finally {
    await c.end();
  }
}

/**
 * A database of its own (`ctl_t_<random>`), for tests that terminate every backend of their
 * database: on a shared one they would cut the connections of test files running alongside.
 */
export async function freshDatabase(): Promise<{ name: string; url: string; drop(): Promise<void> }> {
  const name = freshSchema();
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(PG_URL);
  url.pathname = `/${name}`;
  return {
    name,
    url: url.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: PG_URL });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

/**
 * Ends every connection to `url`'s database but the caller's own; returns how many it ended and
 * how many of those were busy (in a statement or a transaction), not idle.
 */
export async function terminateBackends(url: string): Promise<{ ended: number; busy: number }> {
  const c = new pg.Client({ connectionString: url });
  c.on('error', () => {});
  await c.connect();
  try {
    const r = await c.query(
      `SELECT count(*) FILTER (WHERE ended) AS ended, count(*) FILTER (WHERE ended AND state <> 'idle') AS busy
       FROM (SELECT pg_terminate_backend(pid) AS ended, state FROM pg_stat_activity WHERE datname = current_database()
       AND pid <> pg_backend_pid()) t`,
    );
    return { ended: Number(r.rows[0].ended), busy: Number(r.rows[0].busy) };
  } finally {
    await c.end().catch(() => {});
  }
}
