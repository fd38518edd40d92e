/**
 * The time floor of an offline verifier (PROTOCOL.md §12): the highest of its own clock readings
 * and of the `issuedAt` of every Trust Bundle its root signed, persisted by the host. Never an
 * SBA's or a grant's `issuedAt`: a payer chooses those, and with a clock tolerance could push the
 * floor ahead and lock the terminal out. Every time check uses max(clock, floor), so setting the
 * clock back never revives a bundle the verifier has seen expire, nor an expired SBA or grant (nor
 * an SBA id its ledgers have already forgotten).
 */
import { readClock } from '../values.js';
import { malformed } from '../errors.js';

/** Where the host keeps the floor (flash, a file, a database row). Ms since the epoch. */
export interface TimeFloor {
  /** The floor (0 when nothing is recorded yet). */
  get(): number | Promise<number>;
  /** Raises the floor to `ms` when higher, durably, before returning; never lowers it. */
  raise(ms: number): void | Promise<void>;
}

/** A clock reading is persisted when it is this far past the floor: at most one write a minute. */
export const FLOOR_WRITE_INTERVAL_MS = 60_000;

export interface FlooredTime {
  /** max(clock, floor): what every time check uses. */
  now: number;
  clock: number;
  floor: number;
}

/**
 * Reads the clock against the floor, recording the reading when it moved a minute past it. A clock
 * or a floor that does not read as a finite number is refused (`malformed`), never "no check".
 */
export async function readFlooredTime(clock: () => unknown, floor: TimeFloor | undefined): Promise<FlooredTime> {
  const c = readClock(clock, 'options.now');
  if (!floor) return { now: c, clock: c, floor: 0 };
  const f = await floor.get();
  // A floor that cannot be read is not "no floor": refuse rather than trust the clock alone.
  if (typeof f !== 'number' || !Number.isFinite(f)) malformed('timeFloor.get() must return a finite number');
  if (c >= f + FLOOR_WRITE_INTERVAL_MS) await floor.raise(c);
  return { now: Math.max(c, f), clock: c, floor: f };
}

/**
 * An in-memory floor (tests; a process that lives as long as its verifier).
 * @example await verifyCtl(sba, { …, offline: true, timeFloor: createMemoryTimeFloor() })
 */
export function createMemoryTimeFloor(initial = 0): TimeFloor {
  let floor = initial;
  return {
    get: () => floor,
    raise(ms) {
      if (Number.isFinite(ms) && ms > floor) floor = ms;
    },
  };
}
