/**
 * cli/service/lifecycle.ts in a child process: a signal stops the service and exits 0; a second
 * signal while stopping (Ctrl-C under npm delivers SIGINT twice) does not cut the stop short.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { root } from '../../firmware-bridge/node/device-script.js';

const lifecycle = pathToFileURL(join(root, 'build', 'cli', 'service', 'lifecycle.js')).href;
const kit = pathToFileURL(join(root, 'build', 'service-kit', 'index.js')).href;

/** A service whose stop takes 400 ms and prints when it has finished. */
const SERVICE = `
const { runUntilSignal } = await import(${JSON.stringify(lifecycle)});
const { createLogger } = await import(${JSON.stringify(kit)});
const logger = createLogger({ name: 'lifecycle-test', level: 'info' });
setInterval(() => {}, 1000); // what a listening server does: keeps the process alive
void runUntilSignal(logger, async () => {
  await new Promise((r) => setTimeout(r, 400));
  console.error('stop finished');
});
console.error('ready');
`;

function run(signals: { signal: NodeJS.Signals; afterMs: number }[]) {
  return new Promise<{ code: number | null; err: string }>((resolve) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', SERVICE], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    child.stderr.on('data', (d) => {
      err += d;
      if (err.startsWith('ready') && !child.killed && signals.length) {
        const all = signals.splice(0);
        for (const s of all) setTimeout(() => child.kill(s.signal), s.afterMs);
      }
    });
    child.on('exit', (code) => resolve({ code, err }));
  });
}

test('SIGTERM: the stop runs to its end, exit 0', async () => {
  const r = await run([{ signal: 'SIGTERM', afterMs: 0 }]);
  assert.is(r.code, 0, r.err);
  assert.match(r.err, /stop finished/);
});

test('SIGINT then SIGINT while stopping: the stop still runs to its end, exit 0', async () => {
  const r = await run([
    { signal: 'SIGINT', afterMs: 0 },
    { signal: 'SIGINT', afterMs: 100 },
  ]);
  assert.is(r.code, 0, r.err);
  assert.match(r.err, /stop finished/);
});

test.run();
