/**
 * The synchronous entry for QuickJS-class engines (README.md § QuickJS). Evaluated after an SDK
 * bundle with global `CTL` (`dist/ctl-verify.iife.js` for a terminal, `dist/ctl-wallet.iife.js`
 * for a vehicle, `dist/ctl.iife.js` for both) in an engine whose only host object is `ctlHost`, the raw
 * host ABI: no WebCrypto, no TextEncoder, no getRandomValues, no timers. It installs the host's
 * randomness into the SDK (`setRandomSource`) and defines `CTLDevice.handle(payload)`, which
 * returns a Promise: the host drains the engine's job queue (`executePendingJobs`) until it
 * settles, so from the firmware's side one request is one synchronous call.
 *
 * The raw ABI passes bytes as ArrayBuffer (what an embedding API marshals most cheaply);
 * this file adapts it to the Uint8Array ABI of abi.ts.
 */
import { createDevice, DeviceError, type DeviceSdk } from './device.js';
import { handlePayload } from './protocol.js';
import type { HostAbi, LogLevel } from './abi.js';

/** What the engine's host injects as `globalThis.ctlHost`. */
export interface RawHost {
  now(): number;
  randomBytes(n: number): ArrayBuffer;
  storageGet(key: ArrayBuffer): ArrayBuffer | null;
  storagePut(key: ArrayBuffer, value: ArrayBuffer): void;
  storageCas(key: ArrayBuffer, expected: ArrayBuffer | null, value: ArrayBuffer): boolean;
  log(level: string, message: string): void;
  /** Optional, together: the hardware monotonic counter (README.md § Host ABI). */
  counterRead?(): number;
  counterIncrement?(): number;
}

const g = globalThis as Record<string, any>;
const raw = g['ctlHost'] as RawHost;
const sdk = g['CTL'] as DeviceSdk & { setRandomSource(fn: (n: number) => Uint8Array): void };
if (!raw || !sdk)
  throw new Error(
    'device-entry: evaluate an SDK bundle (dist/ctl-verify.iife.js, ctl-wallet.iife.js ' +
      'or ctl.iife.js) first and inject ctlHost',
  );

const toAb = (u: Uint8Array): ArrayBuffer => u.slice().buffer as ArrayBuffer;
/** Host calls that throw become `host_failure` (README.md § Errors). */
function hostCall<T>(what: string, f: () => T): T {
  try {
    return f();
  } catch (e) {
    throw new DeviceError('host_failure', `${what}: ${e instanceof Error ? e.message : String(e)}`);
  }
}

const abi: HostAbi = {
  now: () => hostCall('now', () => raw.now()),
  randomBytes: (n) => hostCall('randomBytes', () => new Uint8Array(raw.randomBytes(n))),
  storage: {
    get: (k) =>
      hostCall('storage.get', () => {
        const v = raw.storageGet(toAb(k));
        return v === null || v === undefined ? null : new Uint8Array(v);
      }),
    put: (k, v) => hostCall('storage.put', () => raw.storagePut(toAb(k), toAb(v))),
    compareAndSet: (k, e, v) =>
      hostCall('storage.compareAndSet', () => raw.storageCas(toAb(k), e === null ? null : toAb(e), toAb(v)) === true),
  },
  log: (level: LogLevel, message: string) => {
    try {
      raw.log(level, message);
    } catch {
      /* a log line is never worth a failure */
    }
  },
  ...(typeof raw.counterRead === 'function' && typeof raw.counterIncrement === 'function'
    ? {
        monotonicCounter: {
          read: () => hostCall('counterRead', () => raw.counterRead!()),
          increment: () => hostCall('counterIncrement', () => raw.counterIncrement!()),
        },
      }
    : {}),
};

sdk.setRandomSource(abi.randomBytes);
const device = createDevice(sdk, abi);

g['CTLDevice'] = {
  /** One request payload (CBOR) in, a Promise of the response payload out. */
  handle: async (payload: ArrayBuffer): Promise<ArrayBuffer> =>
    toAb(await handlePayload(device, new Uint8Array(payload))),
};
