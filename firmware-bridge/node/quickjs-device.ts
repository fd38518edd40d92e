/**
 * The device inside QuickJS: an SDK bundle (the verifier's, the wallet's, or dist/ctl.iife.js)
 * + the device script, with only `ctlHost` (the firmware ABI) as host object. `request(payload)`
 * is synchronous, as a firmware calls it.
 */
import type { HostAbi } from '../abi.js';
import { createQuickJsEngine, type QuickJsEngine } from './quickjs.js';
import { assertGlobalCtl, deviceScript, IIFE_FILES, readIife, type DeviceBundle } from './device-script.js';

export interface QuickJsDeviceOptions {
  /** The SDK bundle: `verify` for a terminal, `wallet` for a vehicle, `full` (default) for both. */
  bundle?: DeviceBundle;
  /** Also load dist/ctl-p256.iife.js and register it: for P-256 keys on a host without native P-256. */
  p256?: boolean;
  /**
   * Also load dist/ctl-human-agent.iife.js and register it: for grants issued by a person's did:key (PROTOCOL.md §10),
   * opt-in in the role bundles.
   */
  humanAgent?: boolean;
}

export interface QuickJsDevice {
  /** One CBOR request payload in, one CBOR response payload out; synchronous. */
  request(payload: Uint8Array): Uint8Array;
  engine: QuickJsEngine;
  dispose(): void;
}

/**
 * @example const dev = await createQuickJsDevice(abi, { bundle: 'verify' }); const res = dev.request(cborEncode({ id:
 * 1, op: 'status' }))
 */
export async function createQuickJsDevice(abi: HostAbi, o: QuickJsDeviceOptions = {}): Promise<QuickJsDevice> {
  const bundle = o.bundle ?? 'full';
  const engine = await createQuickJsEngine({ abi });
  engine.evalScript(readIife(bundle), IIFE_FILES[bundle]);
  assertGlobalCtl(engine);
  if (o.p256) {
    engine.evalScript(readIife('p256'), IIFE_FILES.p256);
    engine.evalScript('CTL.registerP256(CTLP256.nobleP256);', 'register-p256.js');
  }
  if (o.humanAgent && bundle === 'verify') {
    engine.evalScript(readIife('human-agent'), IIFE_FILES['human-agent']);
    engine.evalScript('CTL.registerHumanAgent(CTLHumanAgent.humanAgentProfile);', 'register-human-agent.js');
  }
  engine.evalScript(await deviceScript(), 'device.iife.js');
  return {
    engine,
    request: (payload) => engine.callBytes('CTLDevice', payload),
    dispose: () => engine.dispose(),
  };
}
