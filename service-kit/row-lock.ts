import type { SqlExecutor } from './database.js';

/**
 * Row lock for a read that a decision in the same transaction depends on: `FOR UPDATE` on
 * PostgreSQL; nothing on SQLite, whose BEGIN IMMEDIATE already holds the only write lock.
 */
export const forUpdate = (q: SqlExecutor) => (q.dialect === 'postgres' ? ' FOR UPDATE' : '');
