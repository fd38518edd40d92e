/**
 * Whether this process's event loop is busy: its utilisation over the last sampling period
 * (`performance.eventLoopUtilization`, sampled every 100 ms by one unref'd timer). Work that can
 * run either on the loop or on a pool thread (a signature, a WAL flush) goes to the pool only when
 * the loop is busy: then the loop serves other requests meanwhile. When it is mostly idle (a lone
 * caller), the hop to a pool thread and back would only add latency, so the work runs inline.
 */
import { performance } from 'node:perf_hooks';

const PERIOD_MS = 100;
/** Utilisation above which the loop counts as busy. */
const BUSY = 0.5;

let busy = false;
let timer: ReturnType<typeof setInterval> | undefined;
let last = performance.eventLoopUtilization();

/** @example if (loopIsBusy()) await onPool(); else inline() */
export function loopIsBusy(): boolean {
  if (!timer) {
    timer = setInterval(() => {
      const now = performance.eventLoopUtilization();
      busy = performance.eventLoopUtilization(now, last).utilization > BUSY;
      last = now;
    }, PERIOD_MS);
    timer.unref();
  }
  return busy;
}
