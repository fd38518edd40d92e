/**
 * A row to insert, as data: written on its own (`insertRow`), or folded into a data-modifying
 * statement as `INSERT … SELECT … FROM <cte>` (`insertSelectSql`, PostgreSQL), so that a change
 * and the rows that record it (audit entry, webhook delivery) are one atomic statement instead of
 * a transaction of several round trips.
 */
import type { SqlExecutor } from './database.js';
import { checkTableName } from './audit-log.js';

export interface RowInsert {
  table: string;
  values: Record<string, unknown>;
  /** Columns that are BIGINT (cast explicitly where PostgreSQL cannot infer the parameter type). */
  bigint?: readonly string[];
}

/** @example await insertRow(q, { table: 'things', values: { id: 'a', n: 1 }, bigint: ['n'] }) */
export async function insertRow(q: SqlExecutor, r: RowInsert): Promise<void> {
  checkTableName(r.table);
  const cols = Object.keys(r.values);
  await q.run(
    `INSERT INTO ${r.table} (${cols.join(', ')}) VALUES (${cols.map(() => '?').join(', ')})`,
    cols.map((c) => r.values[c]),
  );
}

/**
 * `INSERT INTO table (cols) SELECT ?, … FROM <from>` (PostgreSQL casts: text, or bigint), for a
 * CTE member: the row is written only when `<from>` has a row.
 * @example const { sql, params } = insertSelectSql(row, 'pay') // → `x AS (${sql})`
 */
export function insertSelectSql(r: RowInsert, from: string): { sql: string; params: unknown[] } {
  checkTableName(r.table);
  const cols = Object.keys(r.values);
  const big = new Set(r.bigint ?? []);
  const placeholders = cols.map((c) => (big.has(c) ? '?::bigint' : '?::text')).join(', ');
  return {
    sql: `INSERT INTO ${r.table} (${cols.join(', ')}) SELECT ${placeholders} FROM ${from}`,
    params: cols.map((c) => r.values[c]),
  };
}
