/**
 * `npm start`, `npm run authority` and `npm run gateway` under a supervisor: SIGTERM sent to npm's
 * own process must stop the service. Each case runs the real npm script on a temporary data dir
 * and port 0, holds a request in flight (its body half sent), sends SIGTERM to npm, then finishes
 * the body: the request is answered, npm exits 0, the ports close, no process of the tree is
 * left, and the SQLite databases were closed (their -wal files are gone).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { root } from '../../firmware-bridge/node/device-script.js';
import { alive, cmdline, descendants } from '../helpers/processes.js';
import { portOpen } from '../helpers/ports.js';

const ADMIN = 'stop-test-admin-key-0123456789';

/** Waits for the JSON log lines that announce the listening URLs. */
function listeningUrls(child: ChildProcess, count: number, log: { text: string }): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no listening line within 60 s:\n${log.text}`)), 60_000);
    const scan = () => {
      const urls: string[] = [];
      for (const line of log.text.split('\n')) {
        try {
          const o = JSON.parse(line) as { msg?: string; url?: string };
          if (o.url && /listening/.test(o.msg ?? '')) urls.push(o.url);
        } catch {
          /* not a JSON line */
        }
      }
      if (urls.length >= count) (clearTimeout(timer), resolve(urls));
    };
    child.stdout!.on('data', (d) => ((log.text += d), scan()));
    child.stderr!.on('data', (d) => (log.text += d));
    child.once('exit', (code) => reject(new Error(`npm exited ${code} before listening:\n${log.text}`)));
  });
}

/** A POST whose body is sent in two halves: the second only when `finish()` is called. */
function slowPost(url: string, key: string, body: string) {
  const req = request(url, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
    },
  });
  const half = Math.floor(body.length / 2);
  const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
    req.on('response', (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, body: text }));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
  req.write(body.slice(0, half));
  req.flushHeaders();
  return { answer, finish: () => req.end(body.slice(half)) };
}

interface Case {
  script: string;
  /** SIGTERM to npm alone (a supervisor), or SIGINT to the whole process group (Ctrl-C in a terminal). */
  signal?: 'SIGTERM' | 'ctrl-c';
  args: string[];
  env: (dir: string) => Record<string, string>;
  urls: number;
  /** The request held in flight: path, key, body, the statuses that count as served. */
  inflight: { path: string; key: string; body: string; ok: (status: number) => boolean };
}

const authorityWrite = {
  path: '/admin/keys',
  key: ADMIN,
  body: JSON.stringify({ scopes: ['grants:write'], label: 'in flight at SIGTERM' }),
  ok: (s: number) => s === 201,
};
const cases: Case[] = [
  {
    script: 'start',
    args: ['--data', '<dir>'],
    urls: 2,
    env: () => ({ AUTHORITY_PORT: '0', PORT: '0', CTL_ADMIN_API_KEY: ADMIN }),
    inflight: authorityWrite,
  },
  {
    script: 'start',
    signal: 'ctrl-c',
    args: ['--data', '<dir>'],
    urls: 2,
    env: () => ({ AUTHORITY_PORT: '0', PORT: '0', CTL_ADMIN_API_KEY: ADMIN }),
    inflight: authorityWrite,
  },
  {
    script: 'authority',
    args: [],
    urls: 1,
    env: (dir) => ({ PORT: '0', DATABASE_URL: `sqlite:${join(dir, 'authority.db')}`, CTL_ADMIN_API_KEY: ADMIN }),
    inflight: authorityWrite,
  },
  {
    script: 'gateway',
    args: [],
    urls: 1,
    env: (dir) => ({ PORT: '0', DATABASE_URL: `sqlite:${join(dir, 'gateway.db')}`, CTL_GATEWAY_ADMIN_KEY: ADMIN }),
    // Any complete answer proves the request was served, not cut.
    inflight: {
      path: '/admin/owners',
      key: ADMIN,
      body: JSON.stringify({ label: 'in flight at SIGTERM' }),
      ok: (s) => s > 0 && s < 500,
    },
  },
];

for (const c of cases) {
  const how = c.signal === 'ctrl-c' ? 'Ctrl-C (SIGINT to the process group)' : 'SIGTERM to npm';
  test(`npm run ${c.script}: ${how} finishes the request in flight, closes the databases and exits 0`, async () => {
    const dir = mkdtempSync(join(tmpdir(), `ctl-stop-${c.script}-`));
    const args = c.args.map((a) => (a === '<dir>' ? dir : a));
    const env: Record<string, string | undefined> = { ...process.env, LOG_LEVEL: 'info', ...c.env(dir) };
    const npm = spawn('npm', ['run', '--silent', c.script, ...(args.length ? ['--', ...args] : [])], {
      cwd: root,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    const log = { text: '' };
    const exited = new Promise<{ code: number | null; signal: string | null }>((r) =>
      npm.once('exit', (code, signal) => r({ code, signal })),
    );
    let tree: number[] = [];
    try {
      const urls = await listeningUrls(npm, c.urls, log);
      for (const u of urls) assert.is((await fetch(`${u}/healthz`)).status, 200);
      // Under `start` the admin key given is the authority's.
      const target = c.script === 'start' ? authorityUrl(log.text)! : urls[0]!;
      const slow = slowPost(`${target}${c.inflight.path}`, c.inflight.key, c.inflight.body);
      await new Promise((r) => setTimeout(r, 300)); // the request has reached the server
      tree = descendants(npm.pid!);
      assert.ok(tree.length > 0, 'npm has a child process');
      if (c.signal === 'ctrl-c') process.kill(-npm.pid!, 'SIGINT');
      else npm.kill('SIGTERM');
      await new Promise((r) => setTimeout(r, 500)); // the service has seen the signal
      slow.finish();
      const answer = await slow.answer;
      assert.ok(c.inflight.ok(answer.status), `in-flight request answered ${answer.status} ${answer.body}`);
      const end = await Promise.race([exited, new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 15_000))]);
      assert.not.equal(end, 'timeout', `npm still running 15 s after SIGTERM\n${log.text}`);
      assert.equal(end, { code: 0, signal: null }, log.text);
      for (const u of urls) assert.not.ok(await portOpen(u), `${u} still accepts connections`);
      await new Promise((r) => setTimeout(r, 200));
      const left = tree.filter(alive);
      assert.equal(left, [], `processes left running: ${left.map(cmdline).join(', ')}`);
      for (const name of readdirSync(dir)) assert.not.ok(name.endsWith('-wal'), `${name}: the database was not closed`);
      const errors = log.text.split('\n').filter((l) => /"level":(50|60)/.test(l));
      assert.equal(errors, [], 'no error logged while stopping');
    } finally {
      for (const pid of [npm.pid!, ...tree]) if (alive(pid)) process.kill(pid, 'SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

/** The authority's URL from its listening line (under `start` both services log one). */
function authorityUrl(text: string): string | undefined {
  for (const line of text.split('\n')) {
    try {
      const o = JSON.parse(line) as { msg?: string; url?: string };
      if (o.url && /authority/.test(o.msg ?? '')) return o.url;
    } catch {
      /* not JSON */
    }
  }
  return undefined;
}

test.run();
