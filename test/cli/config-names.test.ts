/**
 * A CTL_* variable that nothing reads is most likely misspelt, and would be silently ignored (the
 * egress proxy left off by `CTL_GATEWAY_EGRES_PORT`): each service names it at start with the
 * nearest known name (a warning), and under NODE_ENV=production refuses to start (exit 2). The
 * other service's variables, and those the MCP server, agent tools and tests read, are no strays.
 * Through the real binary; the nearest-name rule also as a function.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { root } from '../../firmware-bridge/node/device-script.js';
import { checkVariableNames, nearestName } from '../../service-kit/config.js';
import { GATEWAY_VARIABLES } from '../../gateway/config.js';
import { AUTHORITY_VARIABLES } from '../../authority/variables.js';

const dir = mkdtempSync(join(tmpdir(), 'ctl-config-names-'));
const sqlite = (name: string) => `sqlite:${join(mkdtempSync(join(dir, 'db-')), name)}`;

/** Runs `ctl …` until it exits, or until `until` matches its stdout (then SIGTERM, `delayMs` later). */
function ctl(args: string[], env: Record<string, string>, until?: RegExp, delayMs = 300) {
  return new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
    const child = spawn(process.execPath, [join(root, 'bin', 'ctl.mjs'), ...args], {
      cwd: dir,
      env: { ...process.env, PORT: '0', AUTHORITY_PORT: '0', LOG_LEVEL: 'info', NODE_ENV: '', ...env },
    });
    let [out, err, stopping] = ['', '', false];
    const check = () =>
      until && !stopping && until.test(out) && ((stopping = true), setTimeout(() => child.kill('SIGTERM'), delayMs));
    child.stdout.on('data', (d) => ((out += d), check()));
    child.stderr.on('data', (d) => (err += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('close', (code) => (clearTimeout(timer), resolve({ code, out, err })));
  });
}

const warningsIn = (out: string) =>
  out
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { level: number; variable?: string; nearest?: string; msg: string })
    .filter((l) => l.level === 40 && l.variable?.startsWith('CTL_') && /not a variable/.test(l.msg));

// Read elsewhere: the other service's, the MCP server's, the tests'. None of them is a stray.
const elsewhere = { CTL_ADMIN_API_KEY: 'a-long-enough-admin-key', CTL_SESSION_TOKEN: 'gw_sess_x', CTL_TEST_ANY: '1' };

test('ctl gateway: a misspelt variable is named at start with the nearest known name', async () => {
  const r = await ctl(
    ['gateway'],
    { DATABASE_URL: sqlite('g.db'), CTL_GATEWAY_EGRES_PORT: '0', ...elsewhere },
    /gateway listening/,
  );
  assert.is(r.code, 0, r.out + r.err);
  const w = warningsIn(r.out);
  assert.equal(
    w.map((x) => [x.variable, x.nearest]),
    [['CTL_GATEWAY_EGRES_PORT', 'CTL_GATEWAY_EGRESS_PORT']],
    r.out,
  );
  assert.match(
    w[0]!.msg,
    /CTL_GATEWAY_EGRES_PORT: not a variable the gateway reads .*did you mean CTL_GATEWAY_EGRESS_PORT\?/,
  );
});

for (const [cmd, variable, nearest] of [
  ['gateway', 'CTL_GATEWAY_EGRES_PORT', 'CTL_GATEWAY_EGRESS_PORT'],
  ['authority', 'CTL_REVOCATON_BASE_URL', 'CTL_REVOCATION_BASE_URL'],
  ['start', 'CTL_GATWAY_ADMIN_KEY', 'CTL_GATEWAY_ADMIN_KEY'],
] as const) {
  test(`ctl ${cmd} under NODE_ENV=production refuses ${variable}, naming ${nearest} (exit 2)`, async () => {
    const r = await ctl(
      cmd === 'start' ? ['start', '--data', mkdtempSync(join(dir, 'start-'))] : [cmd],
      { DATABASE_URL: sqlite(`${cmd}.db`), NODE_ENV: 'production', [variable]: '1', ...elsewhere },
      /listening/,
    );
    assert.is(r.code, 2, `exit ${r.code}\n${r.out}${r.err}`);
    assert.match(r.err, new RegExp(`^ctl ${cmd}: ${variable}: not a variable .* did you mean ${nearest}\\?`), r.err);
    assert.is(r.err.trim().split('\n').length, 1, r.err);
    assert.not.match(r.out, /listening/);
  });
}

test('ctl start: both services read one environment; a stray is said once', async () => {
  const r = await ctl(
    ['start', '--data', mkdtempSync(join(dir, 'start-'))],
    { CTL_GATEWAY_ADMIN_KEY: 'another-long-admin-key', CTL_GATWAY_ISSUER: 'x', ...elsewhere },
    /gateway listening/,
  );
  assert.is(r.code, 0, r.out + r.err);
  assert.equal(
    warningsIn(r.out).map((x) => [x.variable, x.nearest]),
    [['CTL_GATWAY_ISSUER', 'CTL_GATEWAY_ISSUER']],
    r.out,
  );
});

test('ctl start: SIGTERM while it starts (the authority up, the gateway not yet) stops both cleanly', async () => {
  const r = await ctl(['start', '--data', mkdtempSync(join(dir, 'start-'))], {}, /policy authority listening/, 0);
  assert.is(r.code, 0, r.out + r.err);
  assert.match(r.out, /"msg":"stopped"/);
});

test('the nearest known name, or none when nothing is close', () => {
  const gateway = GATEWAY_VARIABLES.map((v) => v[0]);
  assert.is(nearestName('CTL_GATEWAY_EGRES_PORT', gateway), 'CTL_GATEWAY_EGRESS_PORT');
  assert.is(nearestName('CTL_GATEWAY_EGERSS_PORT', gateway), 'CTL_GATEWAY_EGRESS_PORT', 'two letters swapped');
  assert.is(nearestName('CTL_X402_ASSET', gateway), 'CTL_X402_ASSETS');
  assert.is(nearestName('CTL_SOMETHING_ELSE_ENTIRELY', gateway), undefined);
  const w = checkVariableNames({ CTL_SOMETHING_ELSE_ENTIRELY: '1', CTL_ISSUER_DOMAIN: 'x' }, gateway, 'the gateway');
  assert.equal(
    w.map((x) => [x.variable, x.nearest]),
    [
      ['CTL_ISSUER_DOMAIN', undefined],
      ['CTL_SOMETHING_ELSE_ENTIRELY', undefined],
    ],
  );
  assert.match(w[1]!.message, /see --help/);
  const both = [...gateway, ...AUTHORITY_VARIABLES.map((v) => v[0])];
  assert.equal(checkVariableNames({ CTL_ISSUER_DOMAIN: 'x', CTL_GATEWAY_URL: 'u' }, both, 'either'), []);
  assert.throws(
    () => checkVariableNames({ NODE_ENV: 'production', CTL_A: '1', CTL_B: '1' }, gateway, 'the gateway'),
    (e: Error) => /^CTL_A: .*also CTL_B/.test(e.message),
  );
});

test.after(() => rmSync(dir, { recursive: true, force: true }));
test.run();
