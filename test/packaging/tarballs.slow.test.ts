/**
 * The packages as a user gets them: the SDK `ctl` (its publish directory, scripts/sdk-package.mjs)
 * and every workspace (`npm pack --workspaces`) packed into a temporary directory, installed from those tarballs into
 * an empty project (their dependencies from the registry; better-sqlite3 builds there, about a minute), then each
 * service's bin started on SQLite answers /healthz and exits 0 on SIGTERM. The tarballs carry what runs: no tests, no
 * compiled tree, no TypeScript sources, no source maps but the SDK bundles' own; the SDK's manifest runs nothing at
 * install.
 *
 * A new workspace is packed and checked for what it carries with no change here; its bin is
 * started by adding one line to BINS.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn, spawnSync, type ChildProcessByStdio } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { repoRoot } from '../helpers/vectors.js';

type Started = ChildProcessByStdio<Writable, Readable, Readable>;
/** Proves a started bin serves (output: what it wrote to stdout and stderr so far). */
type Probe = (child: Started, output: () => string) => Promise<void>;

/**
 * Every workspace bin that runs a service: how the test sees it serve, how it is told to stop (a
 * network service by SIGTERM, a stdio server by the end of its input; either way it exits 0), and
 * what its `--help` prints.
 */
const BINS: { bin: string; probe: Probe; stop: 'SIGTERM' | 'stdin'; help?: RegExp }[] = [
  {
    bin: 'ctl-authority',
    probe: httpHealth,
    stop: 'SIGTERM',
    help: /^usage: ctl-authority\s[\s\S]*\n {7}ctl-authority root-key\s/,
  },
  {
    bin: 'ctl-gateway',
    probe: httpHealth,
    stop: 'SIGTERM',
    help: /^usage: ctl-gateway\s[\s\S]*\n {2}CTL_GATEWAY_ADMIN_KEY\s/,
  },
  { bin: 'ctl-mcp', probe: mcpInitialize, stop: 'stdin', help: /^usage: ctl-mcp\s[\s\S]*\n {2}CTL_SESSION_TOKEN\s/ },
];

const rootPkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8'));
const work = mkdtempSync(join(tmpdir(), 'ctl-pack-'));
const tarballs = join(work, 'tarballs');
const project = join(work, 'project');
const sdkDir = join(work, 'sdk-package');
/** What the test starts sees only this: no CTL_* or DATABASE_URL of the machine running the tests. */
const baseEnv = { PATH: process.env.PATH!, HOME: process.env.HOME!, NO_COLOR: '1' };

interface Packed {
  name: string;
  filename: string;
  files: { path: string }[];
}
let packed: Packed[] = [];

function run(cmd: string, args: string[], cwd: string, timeoutMs: number) {
  const r = spawnSync(cmd, args, {
    cwd,
    encoding: 'utf8',
    timeout: timeoutMs,
    env: { ...process.env, npm_config_loglevel: 'error' },
  });
  assert.is(
    r.status,
    0,
    `${cmd} ${args.join(' ')} (in ${cwd}) exited ${r.status ?? r.signal}:\n${r.stdout}\n${r.stderr}`,
  );
  return r.stdout;
}

test.before(() => {
  // The SDK is packed from its publish directory (the repository root is private): its device
  // commands' bundles are made here (dist/ itself by `npm run build` or scripts/test.mjs), and every
  // workspace's LICENSE. The workspaces pack with their scripts: each `prepack` bundles it.
  run(process.execPath, [join(repoRoot, 'scripts', 'bundle-packages.mjs'), 'ctl', 'licenses'], repoRoot, 120_000);
  run(process.execPath, [join(repoRoot, 'scripts', 'sdk-package.mjs'), '--out', sdkDir], repoRoot, 120_000);
  const pack = (extra: string[]) =>
    JSON.parse(run('npm', ['pack', '--json', '--pack-destination', tarballs, ...extra], repoRoot, 300_000)) as Packed[];
  run('mkdir', ['-p', tarballs, project], work, 10_000);
  packed = [...pack([sdkDir]), ...pack(['--workspaces'])];
});

test.after(() => rmSync(work, { recursive: true, force: true }));

test('the root and every workspace are packed', () => {
  assert.equal(
    packed.map((p) => p.name).sort(),
    [
      rootPkg.name,
      ...rootPkg.workspaces.map(
        (w: string) => JSON.parse(readFileSync(join(repoRoot, w, 'package.json'), 'utf8')).name,
      ),
    ].sort(),
  );
});

test('the SDK package keeps no runtime dependencies', () => {
  assert.equal(rootPkg.dependencies ?? {}, {});
});

test('each tarball carries what runs: its bins and LICENSE; no test, compiled tree, source map or .ts source', () => {
  for (const p of packed) {
    const files = p.files.map((f) => f.path);
    // Source maps: the SDK bundles' only (dist/<build>.map beside its build), naming the sources without their text.
    const sdkMap = (f: string) =>
      p.name === rootPkg.name && /^dist\/[^/]+\.(c?js)\.map$/.test(f) && files.includes(f.slice(0, -4));
    const stray = files.filter(
      (f) =>
        /(^|\/)(test|build)\//.test(f) ||
        (f.endsWith('.map') && !sdkMap(f)) ||
        (f.endsWith('.ts') && !f.endsWith('.d.ts')),
    );
    assert.equal(stray, [], `${p.name} ships ${stray.join(', ')}`);
    assert.ok(files.includes('LICENSE'), `${p.name} has no LICENSE`);
    const pkg = JSON.parse(
      readFileSync(join(repoRoot, p.name === rootPkg.name ? '' : workspaceOf(p.name), 'package.json'), 'utf8'),
    );
    // A library (agent-tools) has no bins.
    for (const target of Object.values((pkg.bin ?? {}) as Record<string, string>)) {
      assert.ok(files.includes(target.replace(/^\.\//, '')), `${p.name}: bin ${target} is not in the tarball`);
    }
  }
});

test('the SDK tarball: a manifest that runs nothing at install and pulls nothing, and a map for each bundle', () => {
  const sdk = packed.find((p) => p.name === rootPkg.name)!;
  const manifest = JSON.parse(
    run('tar', ['-xOzf', join(tarballs, sdk.filename), 'package/package.json'], work, 30_000),
  );
  for (const k of ['scripts', 'devDependencies', 'workspaces', 'dependencies'])
    assert.is(manifest[k], undefined, `the SDK's manifest carries ${k}`);
  assert.equal(manifest.exports, rootPkg.exports);
  const files = sdk.files.map((f) => f.path);
  for (const f of files.filter((f) => /^dist\/[^/]+\.(c?js)$/.test(f)))
    assert.ok(files.includes(`${f}.map`), `${f} ships without its source map`);
});

test('the tarballs install into an empty project from the registry', () => {
  // npm 11 runs a dependency's install script only when allowed: better-sqlite3 compiles its
  // addon; pkcs11js (optional, for HSM keys) is not needed to run on SQLite.
  writeFileSync(
    join(project, 'package.json'),
    JSON.stringify({
      name: 'ctl-pack-check',
      private: true,
      allowScripts: { 'better-sqlite3': true, pkcs11js: false },
    }),
  );
  run(
    'npm',
    ['install', '--no-audit', '--no-fund', ...packed.map((p) => join(tarballs, p.filename))],
    project,
    600_000,
  );
  for (const { bin } of BINS)
    assert.ok(existsSync(join(project, 'node_modules', '.bin', bin)), `${bin} is not installed`);
});

for (const { bin, probe, stop, help } of BINS) {
  test(`npx runs ${bin}; it starts on SQLite, serves, and exits 0 on ${stop}`, async () => {
    const npx = spawnSync('npx', ['--no', '--', bin, ...(help ? ['--help'] : [])], {
      cwd: project,
      encoding: 'utf8',
      env: { ...baseEnv, ...serviceEnv(bin) },
      timeout: 60_000,
    });
    assert.is(npx.status, 0, npx.stderr);
    if (help) assert.match(npx.stdout, help);

    const child = spawn(join(project, 'node_modules', '.bin', bin), [], {
      cwd: project,
      env: { ...baseEnv, ...serviceEnv(bin) },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      await probe(child, () => out);
    } catch (e) {
      child.kill('SIGKILL');
      throw new Error(`${(e as Error).message}\n--- ${bin} output ---\n${out}`);
    }
    if (stop === 'SIGTERM') child.kill('SIGTERM');
    else child.stdin.end();
    assert.is(await exited, 0, out);
  });
}

test('the SDK package: `ctl` runs a device command, points to the service packages, and imports', () => {
  const keygen = spawnSync('npx', ['--no', '--', 'ctl', 'keygen'], {
    cwd: project,
    encoding: 'utf8',
    env: baseEnv,
    timeout: 60_000,
  });
  assert.is(keygen.status, 0, keygen.stderr);
  assert.ok(JSON.parse(keygen.stdout).publicKeyPem.includes('PUBLIC KEY'), keygen.stdout);
  const gateway = spawnSync('npx', ['--no', '--', 'ctl', 'gateway'], {
    cwd: project,
    encoding: 'utf8',
    env: baseEnv,
    timeout: 60_000,
  });
  assert.is(gateway.status, 2);
  assert.match(gateway.stderr, /ctl-gateway/);
  const sdk = spawnSync(
    process.execPath,
    ['--input-type=module', '-e', "const m = await import('ctl'); console.log(m.canonicalize({ b: 1, a: 2 }))"],
    { cwd: project, encoding: 'utf8', env: baseEnv },
  );
  assert.is(sdk.stdout.trim(), '{"a":2,"b":1}', sdk.stderr);
  // An error from the installed (minified) SDK reads as itself, its stack mapped to the sources.
  const err = spawnSync(
    process.execPath,
    [
      '--enable-source-maps',
      '--input-type=module',
      '-e',
      "const m = await import('ctl'); try { m.parseStrictJson('{') } catch (e) { console.log(e.constructor.name); " +
        'console.log(e.stack) }',
    ],
    { cwd: project, encoding: 'utf8', env: baseEnv },
  );
  const [name, ...stack] = err.stdout.trim().split('\n');
  assert.is(name, 'CtlError', err.stderr);
  assert.match(stack.join('\n'), /src\/encoding\/jcs\.ts/, err.stdout);
});

/**
 * A service on its own SQLite file and a free port; a stdio server gets a gateway address nothing listens on (starting
 * must not need one).
 */
function serviceEnv(bin: string) {
  return {
    PORT: '0',
    HOST: '127.0.0.1',
    DATABASE_URL: `sqlite:${join(project, `${bin}.db`)}`,
    LOG_LEVEL: 'info',
    CTL_GATEWAY_URL: 'http://127.0.0.1:9',
    CTL_SESSION_TOKEN: 'gw_sess_packtest',
  };
}

function workspaceOf(name: string): string {
  const dir = (rootPkg.workspaces as string[]).find(
    (w) => JSON.parse(readFileSync(join(repoRoot, w, 'package.json'), 'utf8')).name === name,
  );
  assert.ok(dir, `no workspace is named ${name}`);
  return dir!;
}

/** Waits for the service's "listening" log line (JSON, with its url), then GET /healthz → 200. */
async function httpHealth(child: Started, output: () => string): Promise<void> {
  const deadline = Date.now() + 60_000;
  let url: string | undefined;
  while (!url) {
    if (child.exitCode !== null) throw new Error(`exited ${child.exitCode} before listening`);
    if (Date.now() > deadline) throw new Error('not listening within 60 s');
    url = output()
      .split('\n')
      .map((l) => /"url":"(http:[^"]+)".*listening/.exec(l)?.[1])
      .find(Boolean);
    if (!url) await new Promise((r) => setTimeout(r, 100));
  }
  const res = await fetch(`${url}/healthz`);
  assert.is(res.status, 200, await res.clone().text());
  assert.equal(await res.json(), { ok: true });
}

/**
 * A Model Context Protocol server on stdio: `initialize` (JSON-RPC, one message a line) answers with its serverInfo.
 */
async function mcpInitialize(child: Started, output: () => string): Promise<void> {
  child.stdin.write(
    `${JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'ctl-pack-test', version: '0' } },
    })}\n`,
  );
  const deadline = Date.now() + 60_000;
  for (;;) {
    const reply = output()
      .split('\n')
      .map((l) => {
        try {
          return JSON.parse(l);
        } catch {
          return undefined;
        }
      })
      .find((m) => m?.id === 1);
    if (reply) {
      assert.type(reply.result?.serverInfo?.name, 'string', JSON.stringify(reply));
      return;
    }
    if (child.exitCode !== null) throw new Error(`exited ${child.exitCode} before answering initialize`);
    if (Date.now() > deadline) throw new Error('no answer to initialize within 60 s');
    await new Promise((r) => setTimeout(r, 100));
  }
}

test.run();
