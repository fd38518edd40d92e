/**
 * The `ctl` a user expects, through the real binary: `--help` on every command and subcommand
 * (exit 0, usage on stdout), `--version`, an unknown flag exits 2 naming it, a port in use is one
 * line naming the port (exit 1), a malformed webhook secret refuses to start naming the variable,
 * `ctl start` reads the very variables `ctl authority` and `ctl gateway` read, and `ctl verify`
 * reads compact CBOR files.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer, type Server } from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { inspect } from 'node:util';
import * as CTL from '../../src/index.js';
import { encodeCompact } from '../../src/compact.js';
import { makeFleet, iso, T0 } from '../offline/fleet.js';
import { root } from '../../firmware-bridge/node/device-script.js';

const dir = mkdtempSync(join(tmpdir(), 'ctl-usage-'));

interface Run {
  code: number | null;
  out: string;
  err: string;
}

/** Runs `ctl …`; a command still running after `timeoutMs` is killed (code null). */
function ctl(args: string[], env: Record<string, string> = {}, timeoutMs = 20_000): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(root, 'bin', 'ctl.mjs'), ...args], {
      cwd: dir,
      env: { ...process.env, PORT: '0', AUTHORITY_PORT: '0', DATABASE_URL: `sqlite:${join(dir, 'x.db')}`, ...env },
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code) => (clearTimeout(timer), resolve({ code, out, err })));
  });
}

/** Every command (one file per command in cli/) and its subcommands. */
const SUBCOMMANDS: Record<string, string[]> = {
  start: [],
  authority: ['root-key'],
  gateway: ['ca'],
  demo: [],
  keygen: [],
  root: ['init', 'show', 'rotate'],
  bundle: ['verify', 'refresh'],
  verify: [],
  human: ['keygen', 'grant', 'revoke'],
  log: ['audit', 'monitor'],
  anchor: ['verify', 'deploy'],
};
const commands = readdirSync(join(root, 'cli'))
  .filter((f) => f.endsWith('.ts'))
  .map((f) => f.slice(0, -3))
  .sort();
const paths = commands.flatMap((c) => [[c], ...(SUBCOMMANDS[c] ?? []).map((s) => [c, s])]);

test('the table lists every command of cli/', () => {
  assert.equal(commands, Object.keys(SUBCOMMANDS).sort());
});

test('ctl --help and -h print the usage and exit 0', async () => {
  for (const flag of ['--help', '-h']) {
    const r = await ctl([flag]);
    assert.is(r.code, 0, r.err);
    assert.match(r.out, /^usage: ctl <command>/);
    for (const c of commands) assert.ok(r.out.includes(`  ${c}`), `ctl --help lists ${c}`);
  }
});

/**
 * Runs `ctl <command> …` in this process, as bin/ctl.mjs does (the command module's `main`), with
 * its output captured: the matrix below is 100-odd runs, and a spawn is mostly Node starting. The
 * binary's own dispatch is checked on a sample of the same paths (`through the binary` below).
 */
async function ctlHere(args: string[]): Promise<Run> {
  const [cmd, ...rest] = args;
  const mod = (await import(pathToFileURL(join(root, 'build', 'cli', `${cmd}.js`)).href)) as {
    main(args: string[]): Promise<number | void>;
  };
  let out = '';
  let err = '';
  const saved = {
    log: console.log,
    error: console.error,
    warn: console.warn,
    out: process.stdout.write,
    err: process.stderr.write,
  };
  const text = (a: unknown[]) => a.map((x) => (typeof x === 'string' ? x : inspect(x))).join(' ') + '\n';
  console.log = (...a: unknown[]) => void (out += text(a));
  console.error = console.warn = (...a: unknown[]) => void (err += text(a));
  process.stdout.write = ((c: string | Uint8Array) => ((out += String(c)), true)) as typeof process.stdout.write;
  process.stderr.write = ((c: string | Uint8Array) => ((err += String(c)), true)) as typeof process.stderr.write;
  try {
    const code = await mod.main(rest);
    return { code: typeof code === 'number' ? code : 0, out, err };
  } finally {
    Object.assign(console, { log: saved.log, error: saved.error, warn: saved.warn });
    process.stdout.write = saved.out;
    process.stderr.write = saved.err;
  }
}

const helpChecks = (path: string[], flag: string, r: Run) => {
  assert.is(r.code, 0, `${path.join(' ')} ${flag}: exit ${r.code}\n${r.out}${r.err}`);
  assert.match(r.out, new RegExp(`^usage: ctl ${path[0]}`), r.out);
  if (path[1]) assert.ok(r.out.includes(`ctl ${path.join(' ')}`), `usage names ${path.join(' ')}:\n${r.out}`);
};
const unknownFlagChecks = (path: string[], flag: string, r: Run) => {
  assert.is(r.code, 2, `${path.join(' ')} ${flag}: exit ${r.code}\n${r.out}${r.err}`);
  assert.ok(r.err.includes(flag), `${path.join(' ')}: ${r.err}`);
};

for (const path of paths) {
  test(`ctl ${path.join(' ')} --help prints its usage on stdout and exits 0`, async () => {
    for (const flag of ['--help', '-h']) helpChecks(path, flag, await ctlHere([...path, flag]));
  });

  test(`ctl ${path.join(' ')} --no-such-flag (and -z) exits 2 naming the flag`, async () => {
    for (const flag of ['--no-such-flag', '-z']) unknownFlagChecks(path, flag, await ctlHere([...path, flag]));
  });
}

test('through the binary: a subcommand --help exits 0 and an unknown flag 2, as in process', async () => {
  const [help, bad] = await Promise.all([ctl(['log', 'audit', '--help']), ctl(['anchor', 'verify', '-z'])]);
  helpChecks(['log', 'audit'], '--help', help);
  unknownFlagChecks(['anchor', 'verify'], '-z', bad);
  const [helpHere, badHere] = [await ctlHere(['log', 'audit', '--help']), await ctlHere(['anchor', 'verify', '-z'])];
  assert.equal([help.out, bad.err], [helpHere.out, badHere.err]);
});

test('ctl --version prints the package version; ctl --bogus exits 2 naming it', async () => {
  const v = await ctl(['--version']);
  assert.is(v.code, 0);
  assert.is(v.out.trim(), JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).version);
  const bogus = await ctl(['--bogus']);
  assert.is(bogus.code, 2);
  assert.ok(bogus.err.includes('--bogus'), bogus.err);
});

async function occupiedPort(): Promise<{ port: number; server: Server }> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as AddressInfo).port, server };
}

for (const [cmd, portVar] of [
  ['authority', 'PORT'],
  ['gateway', 'PORT'],
  ['start', 'AUTHORITY_PORT'],
  ['start', 'PORT'],
] as const) {
  test(`ctl ${cmd} with ${portVar} in use: one line naming the port, exit 1`, async () => {
    const { port, server } = await occupiedPort();
    try {
      const data = mkdtempSync(join(dir, `port-${cmd}-`));
      const r = await ctl(cmd === 'start' ? ['start', '--data', data] : [cmd], {
        [portVar]: String(port),
        DATABASE_URL: `sqlite:${join(data, 'db.sqlite')}`,
        LOG_LEVEL: 'silent',
      });
      assert.is(r.code, 1, `exit ${r.code}\n${r.out}${r.err}`);
      const lines = r.err.trim().split('\n');
      assert.is(lines.length, 1, r.err);
      assert.ok(lines[0]!.includes(String(port)), r.err);
      assert.not.match(r.err, /\n\s+at /);
    } finally {
      server.close();
    }
  });
}

for (const cmd of ['authority', 'start']) {
  test(`ctl ${cmd} refuses a malformed webhook secret, naming CTL_AUDIT_WEBHOOK_SECRET`, async () => {
    const data = mkdtempSync(join(dir, `hook-${cmd}-`));
    const r = await ctl(cmd === 'start' ? ['start', '--data', data] : [cmd], {
      CTL_AUDIT_WEBHOOK_URLS: 'https://hooks.example/ctl',
      CTL_AUDIT_WEBHOOK_SECRET: 'not a secret!',
      DATABASE_URL: `sqlite:${join(data, 'a.db')}`,
    });
    assert.is(r.code, 2, `exit ${r.code}\n${r.out}${r.err}`);
    assert.match(r.err, /CTL_AUDIT_WEBHOOK_SECRET/);
    assert.not.match(r.out, /listening/);
  });
}

test('ctl start refuses what ctl gateway refuses (CTL_X402_ASSETS), naming the variable', async () => {
  const data = mkdtempSync(join(dir, 'x402-'));
  const r = await ctl(['start', '--data', data], { CTL_X402_ASSETS: '{"USDC":"not a list"}' });
  assert.is(r.code, 2, `exit ${r.code}\n${r.out}${r.err}`);
  assert.match(r.err, /CTL_X402_ASSETS/);
});

test('ctl start names its own variable for the authority port (AUTHORITY_PORT), and PORT for the gateway', async () => {
  const data = mkdtempSync(join(dir, 'ports-'));
  const a = await ctl(['start', '--data', data], { AUTHORITY_PORT: 'eighty' });
  assert.is(a.code, 2, a.err);
  assert.match(a.err, /^ctl start: AUTHORITY_PORT: /);
  const g = await ctl(['start', '--data', data], { PORT: 'eighty' });
  assert.is(g.code, 2, g.err);
  assert.match(g.err, /^ctl start: PORT: /);
});

test('ctl start honours CTL_ISSUER_DOMAIN (authority) and CTL_GATEWAY_ALLOW_TARGETS (gateway)', async () => {
  const merchant = createHttpServer((_req, res) =>
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"free":true}'),
  );
  await new Promise<void>((r) => merchant.listen(0, '127.0.0.1', r));
  const target = `127.0.0.1:${(merchant.address() as AddressInfo).port}`;
  const data = mkdtempSync(join(dir, 'start-'));
  const child = spawn(process.execPath, [join(root, 'bin', 'ctl.mjs'), 'start', '--data', data], {
    cwd: dir,
    env: {
      ...process.env,
      PORT: '0',
      AUTHORITY_PORT: '0',
      CTL_ISSUER_DOMAIN: 'issuer.start-test.example',
      CTL_GATEWAY_ALLOW_TARGETS: target,
      LOG_LEVEL: '',
    },
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', () => {});
  try {
    // One log format: every line on stdout is a JSON record (the how-to goes to stderr).
    const lines = () =>
      out
        .split('\n')
        .filter(Boolean)
        .map((l) => {
          try {
            return JSON.parse(l) as Record<string, any>;
          } catch {
            throw new Error(`a plain line among the JSON logs: ${l}`);
          }
        });
    // Both services by name: the egress proxy's "listening" line may come before the gateway's.
    const up = () => ['policy authority listening', 'gateway listening'].every((m) => lines().some((l) => l.msg === m));
    for (let i = 0; i < 300 && !up(); i++) await new Promise((r) => setTimeout(r, 100));
    const authority = lines().find((l) => l.msg === 'policy authority listening');
    const gateway = lines().find((l) => l.msg === 'gateway listening');
    assert.ok(authority && gateway, out);
    assert.is(authority!.issuer, 'issuer.start-test.example');
    // Logs at info by default under start, every stdout line JSON, one stream in time order.
    assert.is(authority!.level, 30);
    const times = lines().map((l) => l.time as number);
    assert.equal(
      times,
      [...times].sort((x, y) => x - y),
      `log lines out of time order:\n${out}`,
    );
    // start writes the owner key once the gateway answers, just after the listening lines.
    const ownerKeyOf = () => {
      try {
        return (JSON.parse(readFileSync(join(data, 'dev-keys.json'), 'utf8')) as { ownerKey?: string }).ownerKey;
      } catch {
        return undefined;
      }
    };
    for (let i = 0; i < 100 && !ownerKeyOf(); i++) await new Promise((r) => setTimeout(r, 100));
    const ownerKey = ownerKeyOf();
    assert.ok(ownerKey, 'start wrote the dev owner key');
    const expiresAt = new Date(Date.now() + 3600_000).toISOString().replace(/\.\d+Z$/, 'Z');
    const created = await fetch(`${gateway!.url}/sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ownerKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ budget: { amount: '500', currency: 'USD' }, purposes: ['api:search'], expiresAt }),
    });
    assert.is(created.status, 201, await created.clone().text());
    const { sessionToken } = (await created.json()) as { sessionToken: string };
    const res = await fetch(`${gateway!.url}/proxy`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${sessionToken}`,
        'x-target-url': `http://${target}/data`,
        'x-ctl-purpose': 'api:search',
      },
    });
    assert.is(
      res.status,
      200,
      `a private target named in CTL_GATEWAY_ALLOW_TARGETS is reached: ${await res.clone().text()}`,
    );
    assert.equal(await res.json(), { free: true });
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('close', r));
    merchant.close();
  }
});

test('ctl verify and ctl bundle verify read the compact CBOR files the SDK writes', async () => {
  const fleet = await makeFleet(CTL, { offline: { maxPayments: 5 } });
  const f = (n: string) => join(dir, n);
  writeFileSync(f('root.pub.pem'), fleet.root.publicKeyPem);
  writeFileSync(f('bundle.cbor'), encodeCompact(await fleet.bundle(3)));
  writeFileSync(f('sba.cbor'), encodeCompact(await fleet.sba('1200')));
  const now = ['--now', iso(T0)];
  const b = await ctl(['bundle', 'verify', f('bundle.cbor'), '--root', f('root.pub.pem'), ...now]);
  assert.is(b.code, 0, b.out + b.err);
  const r = await ctl(['verify', f('sba.cbor'), '--bundle', f('bundle.cbor'), '--root', f('root.pub.pem'), ...now]);
  assert.is(r.code, 0, r.out + r.err);
  assert.match(r.out, /^VALID: /m);
  // A flipped byte inside the signed content is refused, not misread as text.
  const bytes = readFileSync(f('sba.cbor'));
  const at = bytes.indexOf(Buffer.from('1200'));
  bytes[at] = '9'.charCodeAt(0);
  writeFileSync(f('tampered.cbor'), bytes);
  const t = await ctl([
    'verify',
    f('tampered.cbor'),
    '--bundle',
    f('bundle.cbor'),
    '--root',
    f('root.pub.pem'),
    ...now,
  ]);
  assert.is(t.code, 1, t.out + t.err);
});

test.after(() => rmSync(dir, { recursive: true, force: true }));
test.run();
