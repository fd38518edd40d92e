/**
 * The checks every SpendStorage must pass (PROTOCOL.md §7, §12, §13, §15), as plain async
 * functions that throw on failure, so any test runner can run them (entry `ctl/testing`):
 *
 *   for (const c of spendStorageConformance(() => myStorage())) test(c.name, c.run)
 *
 * The multi-counter path (`reserveMany`, `commitMany`, `releaseMany`) is held to every rule the
 * single one is, and to the hold rules of §15. The concurrent cases start many calls at once on
 * one storage; a store that reaches a database or another process through async I/O is raced for
 * real, so give each case a storage that is shared the way production shares it (one pool, one
 * file) when that is what is to be proved.
 */
import type { SpendStorage } from '../wallet/spend-storage.js';
import { freshKey, type ConformanceCase } from './conformance-kit.js';
import { singleCases } from './conformance-single.js';
import { manyCases } from './conformance-many.js';
import { holdCases } from './conformance-holds.js';

export type { ConformanceCase };

export interface ConformanceOptions {
  /**
   * Check the atomic multi-counter reserve (`reserveMany`, `commitMany`, `releaseMany`; PROTOCOL.md
   * §13, §15). Default true: a storage without it can hold no grant with windows and no hold, so
   * pass false only for such a storage.
   */
  atomicReserve?: boolean;
}

/** @example spendStorageConformance(() => createMemorySpendStorage()) */
export function spendStorageConformance(
  factory: () => SpendStorage | Promise<SpendStorage>,
  options: ConformanceOptions = {},
): ConformanceCase[] {
  const single = singleCases(factory, freshKey);
  if (options.atomicReserve === false) return single;
  return [...single, ...manyCases(factory, freshKey), ...holdCases(factory, freshKey)];
}
