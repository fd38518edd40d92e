/**
 * The time floor of an offline verifier (PROTOCOL.md §12): the highest of its own clock readings
 * and of the `issuedAt` of every artifact it accepted, persisted by the host. Every time check
 * uses max(clock, floor), so setting the clock back never revives a bundle the verifier has seen
 * expire, nor an expired SBA or grant (nor an SBA id its ledgers have already forgotten).
 */

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

/** Reads the clock against the floor, recording the reading when it moved a minute past it. */
export async function readFlooredTime(clock: () => number, floor: TimeFloor | undefined): Promise<FlooredTime> {
  const c = clock();
  if (!floor) return { now: c, clock: c, floor: 0 };
  const f = await floor.get();
  // A floor that cannot be read is not "no floor": refuse rather than trust the clock alone.
  if (typeof f !== 'number' || !Number.isFinite(f)) throw new TypeError('timeFloor.get() must return a finite number');
  if (Number.isFinite(c) && c >= f + FLOOR_WRITE_INTERVAL_MS) await floor.raise(c);
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
