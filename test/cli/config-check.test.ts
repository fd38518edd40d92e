/**
 * Configuration is checked at start (docs/operations.md): every mistake below refuses the start
 * with exit 2 and one line naming its variable (a key file too), before anything listens; an unreachable
 * PostgreSQL names DATABASE_URL, not the driver's message; no admin key starts with a warning.
 * Through the real binary, for `ctl gateway`, `ctl authority` and `ctl start`.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { generateKeyPairSync } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { root } from '../../firmware-bridge/node/device-script.js';
import { freePort } from '../helpers/ports.js';

const dir = mkdtempSync(join(tmpdir(), 'ctl-config-'));

interface Run {
  code: number | null;
  out: string;
  err: string;
}

/** Runs `ctl …` until it exits, or until `until` matches its output (then SIGTERM). */
function ctl(args: string[], env: Record<string, string>, until?: RegExp): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(root, 'bin', 'ctl.mjs'), ...args], {
      cwd: dir,
      env: { ...process.env, PORT: '0', AUTHORITY_PORT: '0', LOG_LEVEL: 'info', ...env },
    });
    let out = '';
    let err = '';
    // The listening line comes just before the signal handlers are set: a moment later, SIGTERM stops it cleanly.
    let stopping = false;
    const check = () =>
      until && !stopping && until.test(out) && ((stopping = true), setTimeout(() => child.kill('SIGTERM'), 300));
    child.stdout.on('data', (d) => ((out += d), check()));
    child.stderr.on('data', (d) => (err += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('close', (code) => (clearTimeout(timer), resolve({ code, out, err })));
  });
}

const sqlite = (name: string) => `sqlite:${join(mkdtempSync(join(dir, 'db-')), name)}`;

/** A real Ed25519 key in a PEM file of `mode`. */
function keyFile(mode: number): string {
  const file = join(mkdtempSync(join(dir, 'key-')), 'key.pem');
  writeFileSync(file, generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }));
  chmodSync(file, mode);
  return file;
}

interface Case {
  what: string;
  cmd: 'gateway' | 'authority';
  env: () => Promise<Record<string, string>> | Record<string, string>;
  variable: string;
}

const cases: Case[] = [
  {
    what: 'a public URL that is not http(s)',
    cmd: 'gateway',
    env: () => ({ CTL_GATEWAY_PUBLIC_URL: 'ftp://pay.example.com' }),
    variable: 'CTL_GATEWAY_PUBLIC_URL',
  },
  {
    what: 'a public URL that is not a URL',
    cmd: 'gateway',
    env: () => ({ CTL_GATEWAY_PUBLIC_URL: 'pay.example.com' }),
    variable: 'CTL_GATEWAY_PUBLIC_URL',
  },
  {
    what: 'an allowed target without a port',
    cmd: 'gateway',
    env: () => ({ CTL_GATEWAY_ALLOW_TARGETS: '127.0.0.1:8080,127.0.0.1' }),
    variable: 'CTL_GATEWAY_ALLOW_TARGETS',
  },
  {
    what: 'a private-targets flag that is not 0 or 1',
    cmd: 'gateway',
    env: () => ({ CTL_GATEWAY_ALLOW_PRIVATE_TARGETS: 'true' }),
    variable: 'CTL_GATEWAY_ALLOW_PRIVATE_TARGETS',
  },
  {
    what: 'a DATABASE_URL of another database',
    cmd: 'gateway',
    env: () => ({ DATABASE_URL: 'mysql://ctl@db/ctl' }),
    variable: 'DATABASE_URL',
  },
  {
    what: 'a DATABASE_URL of another database',
    cmd: 'authority',
    env: () => ({ DATABASE_URL: 'mysql://ctl@db/ctl' }),
    variable: 'DATABASE_URL',
  },
  {
    what: 'a KEK of the wrong size',
    cmd: 'gateway',
    env: () => ({ CTL_GATEWAY_KEK: 'c2hvcnQ' }),
    variable: 'CTL_GATEWAY_KEK',
  },
  {
    what: 'a KEK of the wrong size',
    cmd: 'authority',
    env: () => ({ CTL_AUTHORITY_KEK: 'c2hvcnQ' }),
    variable: 'CTL_AUTHORITY_KEK',
  },
  { what: 'an unknown LOG_LEVEL', cmd: 'gateway', env: () => ({ LOG_LEVEL: 'loud' }), variable: 'LOG_LEVEL' },
  { what: 'an unknown LOG_LEVEL', cmd: 'authority', env: () => ({ LOG_LEVEL: 'loud' }), variable: 'LOG_LEVEL' },
  {
    what: 'a short admin key',
    cmd: 'gateway',
    env: () => ({ CTL_GATEWAY_ADMIN_KEY: 'short' }),
    variable: 'CTL_GATEWAY_ADMIN_KEY',
  },
  {
    what: 'a short admin key',
    cmd: 'authority',
    env: () => ({ CTL_ADMIN_API_KEY: 'short' }),
    variable: 'CTL_ADMIN_API_KEY',
  },
  {
    what: 'a revocation base URL that is not http(s)',
    cmd: 'authority',
    env: () => ({ CTL_REVOCATION_BASE_URL: 'ftp://authority.example' }),
    variable: 'CTL_REVOCATION_BASE_URL',
  },
  { what: 'a HOST that is no address', cmd: 'gateway', env: () => ({ HOST: 'bad host' }), variable: 'HOST' },
  { what: 'a HOST that is no address', cmd: 'authority', env: () => ({ HOST: 'bad host' }), variable: 'HOST' },
  {
    what: 'an egress host that is no address',
    cmd: 'gateway',
    env: () => ({ CTL_GATEWAY_EGRESS_PORT: '0', CTL_GATEWAY_EGRESS_HOST: 'no/host' }),
    variable: 'CTL_GATEWAY_EGRESS_HOST',
  },
  {
    what: 'a key file that does not exist',
    cmd: 'gateway',
    env: () => ({ CTL_GATEWAY_RECEIPT_PRIVATE_KEY_FILE: join(dir, 'missing.pem') }),
    variable: 'CTL_GATEWAY_RECEIPT_PRIVATE_KEY_FILE',
  },
  {
    what: 'a key file others can read',
    cmd: 'gateway',
    env: () => ({ CTL_GATEWAY_GRANT_PRIVATE_KEY_FILE: keyFile(0o644) }),
    variable: 'CTL_GATEWAY_GRANT_PRIVATE_KEY_FILE',
  },
  {
    what: 'a key PEM that is no key',
    cmd: 'gateway',
    env: () => ({ CTL_GATEWAY_BUNDLE_PRIVATE_KEY_PEM: 'not a key' }),
    variable: 'CTL_GATEWAY_BUNDLE_PRIVATE_KEY_PEM',
  },
  {
    what: 'a key file that does not exist',
    cmd: 'authority',
    env: () => ({ CTL_POLICY_GRANT_SIGNING_PRIVATE_KEY_FILE: join(dir, 'missing.pem') }),
    variable: 'CTL_POLICY_GRANT_SIGNING_PRIVATE_KEY_FILE',
  },
  {
    what: 'a key file others can read',
    cmd: 'authority',
    env: () => ({ CTL_TRUST_BUNDLE_ROOT_PRIVATE_KEY_FILE: keyFile(0o640) }),
    variable: 'CTL_TRUST_BUNDLE_ROOT_PRIVATE_KEY_FILE',
  },
  {
    what: 'an unreachable PostgreSQL',
    cmd: 'gateway',
    env: async () => ({ DATABASE_URL: `postgres://postgres@127.0.0.1:${await freePort()}/test` }),
    variable: 'DATABASE_URL',
  },
  {
    what: 'an unreachable PostgreSQL',
    cmd: 'authority',
    env: async () => ({ DATABASE_URL: `postgres://postgres@127.0.0.1:${await freePort()}/test` }),
    variable: 'DATABASE_URL',
  },
];

for (const c of cases) {
  test(`ctl ${c.cmd}: ${c.what} refuses the start naming ${c.variable}, exit 2`, async () => {
    const r = await ctl([c.cmd], { DATABASE_URL: sqlite(`${c.cmd}.db`), ...(await c.env()) }, /listening/);
    assert.is(r.code, 2, `exit ${r.code}\n${r.out}${r.err}`);
    assert.match(r.err, new RegExp(`^ctl ${c.cmd}: ${c.variable}: `), r.err);
    assert.is(r.err.trim().split('\n').length, 1, r.err);
    assert.not.match(r.out, /listening/);
  });
}

test('an unreachable PostgreSQL is described, not left to the driver', async () => {
  const port = await freePort();
  const r = await ctl(['gateway'], { DATABASE_URL: `postgres://postgres:secret@127.0.0.1:${port}/test` }, /listening/);
  assert.is(r.code, 2, r.err);
  assert.match(
    r.err,
    new RegExp(
      `DATABASE_URL: cannot connect to PostgreSQL at 127\\.0\\.0\\.1:${port}/test: nothing ` +
        'listens there \\(ECONNREFUSED\\)',
    ),
  );
  assert.not.match(r.err, /secret/);
});

test('ctl start names its own variables for each service database', async () => {
  const port = await freePort();
  const data = mkdtempSync(join(dir, 'start-'));
  const a = await ctl(
    ['start', '--data', data],
    { AUTHORITY_DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/test` },
    /listening/,
  );
  assert.is(a.code, 2, a.err);
  assert.match(a.err, /^ctl start: AUTHORITY_DATABASE_URL: cannot connect/);
  const g = await ctl(['start', '--data', data], { GATEWAY_DATABASE_URL: 'mysql://x' }, /listening/);
  assert.is(g.code, 2, g.err);
  assert.match(g.err, /^ctl start: GATEWAY_DATABASE_URL: /);
  const p = await ctl(['start', '--data', data], { CTL_GATEWAY_PUBLIC_URL: 'localhost:8402' }, /listening/);
  assert.is(p.code, 2, p.err);
  assert.match(p.err, /^ctl start: CTL_GATEWAY_PUBLIC_URL: /);
});

for (const [cmd, variable] of [
  ['gateway', 'CTL_GATEWAY_ADMIN_KEY'],
  ['authority', 'CTL_ADMIN_API_KEY'],
] as const) {
  test(`ctl ${cmd} without ${variable}: starts, with a warning naming it`, async () => {
    const r = await ctl(
      [cmd],
      { DATABASE_URL: sqlite(`${cmd}.db`), [variable]: '' },
      new RegExp(`"variable":"${variable}"`),
    );
    assert.is(r.code, 0, r.out + r.err);
    const warning = r.out
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { level: number; variable?: string; msg: string })
      .find((l) => l.variable === variable);
    assert.ok(warning, r.out);
    assert.is(warning!.level, 40);
    assert.match(warning!.msg, /can be created/);
  });
}

test('a well-formed configuration still starts (IPv6 target, http public URL)', async () => {
  const r = await ctl(
    ['gateway'],
    {
      DATABASE_URL: sqlite('g.db'),
      CTL_GATEWAY_PUBLIC_URL: 'http://pay.example.test:8402',
      CTL_GATEWAY_ALLOW_TARGETS: '127.0.0.1:8080, [::1]:9000',
      CTL_GATEWAY_ALLOW_PRIVATE_TARGETS: '0',
      CTL_GATEWAY_ADMIN_KEY: 'a-long-enough-admin-key',
    },
    /listening/,
  );
  assert.is(r.code, 0, r.out + r.err);
  assert.match(r.out, /gateway listening/);
});

test.after(() => rmSync(dir, { recursive: true, force: true }));
test.run();
