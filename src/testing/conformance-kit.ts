/** What the conformance cases share: the failure, the multi-counter calls, a fresh key. */
import type { ReserveManyOptions, SpendCounter, SpendStorage } from '../wallet/spend-storage.js';

export interface ConformanceCase {
  name: string;
  run(): Promise<void>;
}

export type Factory = () => SpendStorage | Promise<SpendStorage>;

export function expect(cond: boolean, what: string): void {
  if (!cond) throw new Error(`SpendStorage conformance: ${what}`);
}

/** A key no other case uses: cases may share one storage. */
export const freshKey = () => 'k_' + Math.random().toString(36).slice(2);

/** The storage's multi-counter calls, or a failure saying they are missing. */
export async function manyOf(factory: Factory) {
  const s = await factory();
  expect(
    typeof s.reserveMany === 'function' && typeof s.commitMany === 'function' && typeof s.releaseMany === 'function',
    'reserveMany, commitMany and releaseMany are required (or pass { atomicReserve: false })',
  );
  return {
    total: (key: string) => s.total(key),
    reserve: (id: string, c: SpendCounter[], o?: ReserveManyOptions) => s.reserveMany!(id, c, o),
    commit: (id: string, captured?: bigint, now?: number) =>
      s.commitMany!(id, captured, now === undefined ? undefined : { now }),
    release: (id: string) => s.releaseMany!(id),
  };
}

/** `reserved`, `duplicate`, or `exceeded:<key>`. */
export const res = (r: { result: string; key?: string }) => (r.key === undefined ? r.result : `${r.result}:${r.key}`);

/** Whether `f` throws a RangeError (time that is not a finite number, PROTOCOL.md §12). */
export async function throwsRange(f: () => unknown): Promise<boolean> {
  try {
    await f();
    return false;
  } catch (e) {
    return e instanceof RangeError;
  }
}
