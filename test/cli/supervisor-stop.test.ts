/**
 * A supervisor (systemd, `docker stop`) signals only the process it started. However the service
 * was started — `npx ctl-gateway`, `npx ctl-authority`, the bins themselves, `ctl start`,
 * `npm start` — SIGTERM to that top process alone stops the service cleanly: it logs `stopped`
 * (it exits 0), its port is free and no process of the tree is left running.
 *
 * Under npx, npm runs the bin through `sh -c`, and dash dies of the SIGTERM npm passes it: npm then
 * re-raises SIGTERM on itself, so npx's own status is 143 whatever the service does (npm's
 * @npmcli/run-script); the service's clean stop is what is checked there.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { root } from '../../firmware-bridge/node/device-script.js';
import { alive, cmdline, descendants } from '../helpers/processes.js';
import { portOpen } from '../helpers/ports.js';
import { freshServiceBundles } from './service-bundles.js';

const ADMIN = 'supervisor-test-admin-key-0123';

interface Case {
  how: string;
  command: string;
  args: string[];
  env: (dir: string) => Record<string, string>;
  urls: number;
  /** npx: npm's own status is its shell's, killed by the signal (see above). */
  npx?: boolean;
}

const gatewayEnv = (dir: string) => ({
  PORT: '0',
  DATABASE_URL: `sqlite:${join(dir, 'gateway.db')}`,
  CTL_GATEWAY_ADMIN_KEY: ADMIN,
});
const authorityEnv = (dir: string) => ({
  PORT: '0',
  DATABASE_URL: `sqlite:${join(dir, 'authority.db')}`,
  CTL_ADMIN_API_KEY: ADMIN,
});
const bin = (name: string) => join(root, 'node_modules', '.bin', name);

const cases: Case[] = [
  { how: 'npx ctl-gateway', command: 'npx', args: ['ctl-gateway'], env: gatewayEnv, urls: 1, npx: true },
  { how: 'npx ctl-authority', command: 'npx', args: ['ctl-authority'], env: authorityEnv, urls: 1, npx: true },
  { how: 'the ctl-gateway bin', command: bin('ctl-gateway'), args: [], env: gatewayEnv, urls: 1 },
  { how: 'the ctl-authority bin', command: bin('ctl-authority'), args: [], env: authorityEnv, urls: 1 },
  {
    how: 'ctl start',
    command: join(root, 'bin', 'ctl.mjs'),
    args: ['start', '--data', '<dir>'],
    env: () => ({ PORT: '0', AUTHORITY_PORT: '0', CTL_ADMIN_API_KEY: ADMIN }),
    urls: 2,
  },
  {
    how: 'npm start',
    command: 'npm',
    args: ['start', '--silent', '--', '--data', '<dir>'],
    env: () => ({ PORT: '0', AUTHORITY_PORT: '0', CTL_ADMIN_API_KEY: ADMIN }),
    urls: 2,
  },
];

test.before(() => freshServiceBundles(['authority', 'gateway']));

/** The JSON log records on stdout. */
const records = (text: string) =>
  text.split('\n').flatMap((l) => {
    try {
      return [JSON.parse(l) as { msg?: string; url?: string; level?: number }];
    } catch {
      return [];
    }
  });

for (const c of cases) {
  test(`${c.how}: SIGTERM to the top process alone stops the service cleanly, nothing left`, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ctl-supervisor-'));
    const args = c.args.map((a) => (a === '<dir>' ? dir : a));
    const child = spawn(c.command, args, {
      cwd: root,
      env: { ...process.env, LOG_LEVEL: 'info', ...c.env(dir) },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const exited = new Promise<{ code: number | null; signal: string | null }>((r) =>
      child.once('exit', (code, signal) => r({ code, signal })),
    );
    let tree: number[] = [];
    try {
      for (
        let i = 0;
        i < 600 && records(out).filter((r) => r.url && /listening/.test(r.msg ?? '')).length < c.urls;
        i++
      ) {
        await new Promise((r) => setTimeout(r, 100));
      }
      const urls = records(out)
        .filter((r) => r.url && /listening/.test(r.msg ?? ''))
        .map((r) => r.url!);
      assert.is(urls.length, c.urls, `not listening:\n${out}${err}`);
      await new Promise((r) => setTimeout(r, 500)); // past the listening line: the handlers are set
      for (const u of urls) assert.is((await fetch(`${u}/healthz`)).status, 200);
      tree = descendants(child.pid!);
      child.kill('SIGTERM');
      const end = await Promise.race([exited, new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 20_000))]);
      assert.not.equal(end, 'timeout', `still running 20 s after SIGTERM\n${out}${err}`);
      if (!c.npx) assert.equal(end, { code: 0, signal: null }, out + err);
      // The service itself stopped (its 'stopped' line is written just before exit 0), not cut.
      for (let i = 0; i < 100 && tree.some(alive); i++) await new Promise((r) => setTimeout(r, 100));
      const left = tree.filter(alive);
      assert.equal(left, [], `processes left running: ${left.map(cmdline).join(', ')}`);
      const stopped = records(out).filter((r) => r.msg === 'stopped');
      assert.ok(stopped.length >= 1, `the service logged no clean stop:\n${out}`);
      for (const u of urls) assert.not.ok(await portOpen(u), `${u} still accepts connections`);
      assert.not.ok(
        records(out).some((r) => (r.level ?? 0) >= 50),
        `an error was logged while stopping:\n${out}`,
      );
    } finally {
      for (const pid of [child.pid!, ...tree]) if (alive(pid)) process.kill(pid, 'SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

test.run();
