/** The device CLI as a user runs it: `node bin/ctl.mjs <args>` in a directory, output collected. */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { root as repo } from '../../firmware-bridge/node/device-script.js';

export interface CtlRun {
  code: number | null;
  out: string;
  err: string;
}

/** @example const r = await runCtl({ cwd: dir }, 'bundle', 'verify', 'b.json') */
export function runCtl(
  o: { cwd: string; env?: Record<string, string | undefined> },
  ...args: string[]
): Promise<CtlRun> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(repo, 'bin', 'ctl.mjs'), ...args], {
      cwd: o.cwd,
      env: o.env ? { ...process.env, ...o.env } : process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('close', (code) => resolve({ code, out, err }));
  });
}
