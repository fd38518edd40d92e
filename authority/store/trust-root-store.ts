/**
 * The published root chain (PROTOCOL.md §11) in the database, so every instance on it serves
 * and signs under the same root version. A version is inserted once: the primary key makes two
 * instances publishing the same version at once keep exactly one (the other is told `false`).
 */
import { changeWith, type SqlDatabase, type TxEffect } from '../../service-kit/index.js';

export interface TrustRootStore {
  /** The statements as published (JSON text), version 2 upwards, in order. */
  listRootStatements(): Promise<
    Array<{ rootVersion: number; statement: string; publishedAt: string; publishedBy: string }>
  >;
  /**
   * Stores version `rootVersion` and runs `effect` (the audit entry) in the same transaction;
   * false when that version is already stored (another publisher won), with no effect.
   */
  appendRootStatement(
    rootVersion: number,
    statement: string,
    at: string,
    by: string,
    effect?: TxEffect<void>,
  ): Promise<boolean>;
}

type Row = { root_version: number | string; statement_json: string; published_at: string; published_by: string };

/**
 * @example const roots = createTrustRootStore(db); await roots.appendRootStatement(2, JSON.stringify(s2), at, 'admin')
 */
export function createTrustRootStore(db: SqlDatabase): TrustRootStore {
  return {
    async listRootStatements() {
      const rows = await db.all<Row>('SELECT * FROM trust_root_statements ORDER BY root_version');
      return rows.map((r) => ({
        rootVersion: Number(r.root_version),
        statement: r.statement_json,
        publishedAt: r.published_at,
        publishedBy: r.published_by,
      }));
    },
    appendRootStatement(rootVersion, statement, at, by, effect) {
      return changeWith(
        db,
        async (q) => {
          const inserted = await q.all<{ root_version: number | string }>(
            `INSERT INTO trust_root_statements (root_version, statement_json, published_at, published_by)
              VALUES (?, ?, ?, ?)
           ON CONFLICT (root_version) DO NOTHING RETURNING root_version`,
            [rootVersion, statement, at, by],
          );
          return inserted.length === 1;
        },
        effect && (async (q, stored) => (stored ? effect(q) : undefined)),
      );
    },
  };
}
