/**
 * The device inside QuickJS: dist/ctl.iife.js + the device script, with only `ctlHost` (the
 * firmware ABI) as host object. `request(payload)` is synchronous, as a firmware calls it.
 */
import type { HostAbi } from '../abi.js';
import { createQuickJsEngine, type QuickJsEngine } from './quickjs.js';
import { assertGlobalCtl, deviceScript, readIife } from './device-script.js';

export interface QuickJsDevice {
  /** One CBOR request payload in, one CBOR response payload out; synchronous. */
  request(payload: Uint8Array): Uint8Array;
  engine: QuickJsEngine;
  dispose(): void;
}

/** @example const dev = await createQuickJsDevice(abi); const res = dev.request(cborEncode({ id: 1, op: 'status' })) */
export async function createQuickJsDevice(abi: HostAbi): Promise<QuickJsDevice> {
  const engine = await createQuickJsEngine({ abi });
  engine.evalScript(readIife(), 'ctl.iife.js');
  assertGlobalCtl(engine);
  engine.evalScript(await deviceScript(), 'device.iife.js');
  return {
    engine,
    request: (payload) => engine.callBytes('CTLDevice', payload),
    dispose: () => engine.dispose(),
  };
}
