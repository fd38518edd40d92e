/**
 * The reference host: runs the bridge as a child process and talks frames to it over its
 * stdin/stdout, as a firmware does over a UART. `request` resolves with the decoded response.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { cborDecode, cborEncode } from '../../src/entries/compact.js';
import { createFrameReader, frame, type Response } from '../protocol.js';

export interface BridgeClient {
  request(op: string, args?: Record<string, unknown>): Promise<Response>;
  /** Sends raw bytes (tests of malformed input) and resolves with the next response. */
  sendRaw(bytes: Uint8Array): Promise<Response>;
  child: ChildProcess;
  stderr(): string;
  close(): Promise<number | null>;
}

export interface SpawnBridgeOptions {
  flash: string;
  engine?: 'quickjs' | 'node';
  /** Fixed clock (ISO), for tests. */
  now?: string;
}

export const bridgeMainPath = fileURLToPath(new URL('./bridge-main.js', import.meta.url));

/** @example const bridge = spawnBridge({ flash: '/tmp/flash.json' }); await bridge.request('status') */
export function spawnBridge(o: SpawnBridgeOptions): BridgeClient {
  const args = [
    bridgeMainPath,
    '--flash',
    o.flash,
    '--engine',
    o.engine ?? 'quickjs',
    ...(o.now ? ['--now', o.now] : []),
  ];
  const child = spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  const reader = createFrameReader(Number.MAX_SAFE_INTEGER);
  const waiting: Array<{ resolve: (r: Response) => void; reject: (e: Error) => void }> = [];
  let err = '';
  let nextId = 1;
  child.stderr!.on('data', (d) => (err += d));
  child.stdout!.on('data', (chunk: Buffer) => {
    for (const item of reader.push(new Uint8Array(chunk))) {
      if (item instanceof Uint8Array) waiting.shift()?.resolve(cborDecode(item) as unknown as Response);
    }
  });
  child.on('exit', (code) => {
    for (const w of waiting.splice(0)) w.reject(new Error(`bridge exited (${code}): ${err}`));
  });
  const next = () =>
    new Promise<Response>((resolve, reject) => {
      if (child.exitCode !== null) return reject(new Error(`bridge exited (${child.exitCode}): ${err}`));
      waiting.push({ resolve, reject });
    });
  return {
    child,
    request(op, args = {}) {
      const p = next();
      child.stdin!.write(frame(cborEncode({ id: nextId++, op, args })));
      return p;
    },
    sendRaw(bytes) {
      const p = next();
      child.stdin!.write(bytes);
      return p;
    },
    stderr: () => err,
    close() {
      return new Promise((resolve) => {
        if (child.exitCode !== null) return resolve(child.exitCode);
        child.once('exit', (code) => resolve(code));
        child.stdin!.end();
      });
    },
  };
}
