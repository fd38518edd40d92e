/**
 * The reference bridge process: frames in on stdin, frames out on stdout (protocol.ts), the SDK
 * running inside QuickJS with the firmware ABI backed by a file (flash) and node:crypto (TRNG).
 * Logs go to stderr; stdout carries frames only.
 *
 * node build/firmware-bridge/node/bridge-main.js --flash FILE [--engine quickjs|node] [--bundle verify|wallet|full]
 * [--p256] [--human-agent] [--now ISO]
 *
 * `--bundle` picks the SDK a device carries: `verify` (dist/ctl-verify.iife.js) for a terminal
 * that only verifies, `wallet` (dist/ctl-wallet.iife.js) for one that only signs, `full` (default).
 */
import { createFileByteStorage } from './file-storage.js';
import { createNodeAbi } from './test-abi.js';
import { createFrameReader, encodeResponse, frame, handlePayload, oversizedResponse } from '../protocol.js';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const flash = arg('--flash');
if (!flash) {
  process.stderr.write(
    'usage: bridge-main --flash FILE [--engine quickjs|node] [--bundle verify|wallet|full] ' +
      '[--p256] [--human-agent] [--now ISO]\n',
  );
  process.exit(2);
}
const engine = arg('--engine') ?? 'quickjs';
const bundle = arg('--bundle') ?? 'full';
if (bundle !== 'verify' && bundle !== 'wallet' && bundle !== 'full') {
  process.stderr.write(`unknown bundle ${bundle}: verify, wallet or full\n`);
  process.exit(2);
}
const nowArg = arg('--now');
const abi = createNodeAbi({ storage: createFileByteStorage(flash), ...(nowArg ? { now: Date.parse(nowArg) } : {}) });
abi.log = (level, message) => void process.stderr.write(`[bridge ${level}] ${message}\n`);

const humanAgent = process.argv.includes('--human-agent');
let handle: (payload: Uint8Array) => Promise<Uint8Array>;
if (engine === 'quickjs') {
  const { createQuickJsDevice } = await import('./quickjs-device.js');
  const dev = await createQuickJsDevice(abi, { bundle, p256: process.argv.includes('--p256'), humanAgent });
  handle = async (p) => dev.request(p);
} else if (engine === 'node') {
  const CTL =
    bundle === 'verify'
      ? await import('../../src/entries/verify.js')
      : bundle === 'wallet'
        ? await import('../../src/entries/wallet.js')
        : await import('../../src/index.js');
  // The same opt-in as the QuickJS engine's: only the verifier bundle leaves the profile out.
  if (humanAgent && bundle === 'verify') {
    const { humanAgentProfile } = await import('../../src/entries/human-agent.js');
    (CTL as typeof import('../../src/entries/verify.js')).registerHumanAgent(humanAgentProfile);
  }
  const { createDevice } = await import('../device.js');
  const device = createDevice(CTL, abi);
  handle = (p) => handlePayload(device, p);
} else {
  process.stderr.write(`unknown engine ${engine}\n`);
  process.exit(2);
}

const reader = createFrameReader();
let queue = Promise.resolve();
const write = (payload: Uint8Array) => process.stdout.write(frame(payload));

process.stdin.on('data', (chunk: Buffer) => {
  const items = reader.push(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.length));
  for (const item of items) {
    queue = queue.then(async () => {
      if (!(item instanceof Uint8Array)) return void write(oversizedResponse(item.oversized));
      try {
        write(await handle(item));
      } catch (e) {
        // The device answers every payload itself; this is the engine failing (e.g. out of memory).
        write(encodeResponse({ id: null, ok: false, error: { code: 'internal', message: 'the engine failed' } }));
        process.stderr.write(`[bridge error] ${(e as Error).message}\n`);
      }
    });
  }
});
process.stdin.on('end', () => void queue.then(() => process.exit(0)));
process.stderr.write(`[bridge info] ready (engine ${engine}, bundle ${bundle})\n`);
