/**
 * One of the two processes of file-storage-processes.test.ts: waits for the common start time,
 * then reserves `count` payments of 1 against a ceiling on the shared flash file, and prints how
 * many were reserved. argv: flash path, tag, count, ceiling, start (ms since the epoch).
 */
import { createFileByteStorage } from '../../firmware-bridge/node/file-storage.js';
import { createKvSpendStorage } from '../../firmware-bridge/kv-spend-storage.js';

const [path, tag, count, ceiling, start] = process.argv.slice(2);
const spend = createKvSpendStorage(createFileByteStorage(path!), { maxAttempts: 10_000 });
const pause = new Int32Array(new SharedArrayBuffer(4));
while (Date.now() < Number(start)) Atomics.wait(pause, 0, 0, 1);
let reserved = 0;
for (let i = 0; i < Number(count); i++) {
  if (spend.reserve('offline-count:g', `${tag}-${i}`, 1n, BigInt(ceiling!)) === 'reserved') reserved++;
}
process.stdout.write(JSON.stringify({ tag, reserved }) + '\n');
