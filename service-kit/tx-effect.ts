/**
 * Work a change does inside its own transaction: the audit entry that records it and the webhook
 * deliveries it causes (the outbox) commit with the change or not at all. What the effect
 * returns runs once the transaction has committed (wake the outbox, tell listeners), never for
 * a change that rolled back.
 */
import type { SqlDatabase, SqlExecutor } from './database.js';

export type TxEffect<R = void> = (q: SqlExecutor, result: R) => Promise<void | (() => void)>;

/** Several effects as one, in order; their after-commit work in the same order. */
export function allEffects<R>(...effects: Array<TxEffect<R> | undefined>): TxEffect<R> {
  return async (q, result) => {
    const after: Array<() => void> = [];
    for (const e of effects) {
      const a = e ? await e(q, result) : undefined;
      if (a) after.push(a);
    }
    return () => after.forEach((a) => a());
  };
}

/** Thrown by a change's `work` to roll back everything its transaction wrote (effects included) and return `value`. */
export class Rollback<T> extends Error {
  constructor(readonly value: T) {
    super('rolled back');
  }
}

/**
 * Runs `first`, `work` and then `effect` in one transaction, then their after-commit work.
 * `first` writes what does not depend on the result before `work` takes its locks, so a hot
 * row is locked only from `work` to the commit; `work` throws `Rollback` to undo them.
 * @example const ok = await changeWith(db, (q) => q.run('UPDATE …'), audit.entry('system', 'x.y', id))
 */
export async function changeWith<R>(
  db: SqlDatabase,
  work: (q: SqlExecutor) => Promise<R>,
  effect: TxEffect<R> | undefined,
  options: { lock?: string; first?: TxEffect<void> } = {},
): Promise<R> {
  let after: Array<() => void> = [];
  let result: R;
  try {
    result = await db.tx(
      async (q) => {
        after = [];
        const f = options.first && (await options.first(q, undefined));
        if (f) after.push(f);
        const r = await work(q);
        const a = effect && (await effect(q, r));
        if (a) after.push(a);
        return r;
      },
      options.lock ? { lock: options.lock } : {},
    );
  } catch (e) {
    if (e instanceof Rollback) return e.value as R;
    throw e;
  }
  for (const a of after) a();
  return result;
}
