/**
 * How the runtime tests and bench/runtimes.mjs reach each target: the Bun and Deno binaries that
 * the npm packages ship (or the PATH), and QuickJS with dist/ctl.iife.js and the firmware ABI.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createContext, runInContext } from 'node:vm';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { createQuickJsEngine } from '../../firmware-bridge/node/quickjs.js';
import { createNodeAbi } from '../../firmware-bridge/node/test-abi.js';
import { assertGlobalCtl, root } from '../../firmware-bridge/node/device-script.js';

/** The binary of `name` that answers `--version`, or undefined. */
export function findRuntime(name: 'bun' | 'deno'): string | undefined {
  const candidates = [join(root, 'node_modules', '.bin', name)];
  const which = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
  if (which.status === 0 && which.stdout.trim()) candidates.push(which.stdout.trim());
  for (const c of candidates) {
    if (!existsSync(c)) continue;
    const v = spawnSync(c, ['--version'], { encoding: 'utf8', timeout: 20_000 });
    if (v.status === 0) return c;
  }
  return undefined;
}

export interface QuickJsRun {
  result: { passed: number; failed: number; outcomes: Array<[string, string]> };
  failures: string[];
  hostObjects: Record<string, string>;
  backend: string;
}

export type SuiteRole = 'full' | 'verify' | 'wallet';

/** The portable suite as a classic script (its one `export` removed), for engines without modules. */
export function suiteScript(suiteSource: string): string {
  const script = suiteSource.replace(/^export async function run\(/m, 'async function run(');
  if (script === suiteSource) throw new Error('portable-suite.mjs: `export async function run(` not found');
  return script;
}

/**
 * Runs the portable suite inside QuickJS: an SDK bundle (dist/ctl.iife.js or a role's), the
 * opt-in P-256 bundle registered when given (QuickJS has no native P-256), then the SDK's
 * randomness from the firmware ABI (setRandomSource), then the suite as a classic script.
 */
export async function runInQuickJs(
  iife: string,
  suiteSource: string,
  fixtures: unknown,
  o: { role?: SuiteRole; p256Iife?: string; humanAgentIife?: string } = {},
): Promise<QuickJsRun> {
  const engine = await createQuickJsEngine({ abi: createNodeAbi() });
  try {
    engine.evalScript(iife, 'ctl.iife.js');
    assertGlobalCtl(engine);
    if (o.p256Iife) {
      engine.evalScript(o.p256Iife, 'ctl-p256.iife.js');
      engine.evalScript('CTL.registerP256(CTLP256.nobleP256);', 'register-p256.js');
    }
    if (o.humanAgentIife) engine.evalScript(o.humanAgentIife, 'ctl-human-agent.iife.js');
    engine.evalScript(
      'CTL.setRandomSource(function (n) { return new Uint8Array(ctlHost.randomBytes(n)); });',
      'random.js',
    );
    const hostObjects = engine.evalSync(
      '({ crypto: typeof crypto, TextEncoder: typeof TextEncoder, fetch: typeof fetch, setTimeout: ' +
        'typeof setTimeout, process: typeof process, ctlHost: typeof ctlHost })',
    ) as Record<string, string>;
    engine.evalScript(suiteScript(suiteSource), 'portable-suite.js');
    engine.evalScript(`var __fixtures = ${JSON.stringify(fixtures)}; var __failures = [];`, 'fixtures.js');
    const result = engine.evalSync(
      `run(CTL, function (n, ok, d) { if (!ok) __failures.push(n + ': ' + d); }, __fixtures, ` +
        `${JSON.stringify(o.role ?? 'full')}, typeof CTLHumanAgent === 'object' ? CTLHumanAgent ` +
        ': undefined)',
    ) as QuickJsRun['result'];
    const failures = engine.evalSync('__failures') as string[];
    const backend = engine.evalSync('CTL.getCryptoBackendName()') as string;
    if (failures.length) console.log(failures.join('\n'));
    return { result, failures, hostObjects, backend };
  } finally {
    engine.dispose();
  }
}

/**
 * Runs the portable suite in a bare `node:vm` context: no process, crypto, TextEncoder, fetch or
 * timers, only the bundle (and the opt-in P-256), and randomness handed in as a function, as an
 * embedder of a plain ECMAScript engine would. Values cross the realm boundary as JSON only.
 */
export async function runInBareVm(
  iife: string,
  suiteSource: string,
  fixtures: unknown,
  o: { role?: SuiteRole; p256Iife?: string; humanAgentIife?: string } = {},
): Promise<QuickJsRun> {
  const context = createContext({ __hostRandom: (n: number) => Array.from(randomBytes(n)) });
  const run = (code: string, filename: string) => runInContext(code, context, { filename });
  run(iife, 'ctl.iife.js');
  if (run('typeof CTL', 'probe.js') !== 'object') throw new Error('the bundle defines no global CTL');
  if (o.p256Iife) {
    run(o.p256Iife, 'ctl-p256.iife.js');
    run('CTL.registerP256(CTLP256.nobleP256);', 'register-p256.js');
  }
  if (o.humanAgentIife) run(o.humanAgentIife, 'ctl-human-agent.iife.js');
  run(
    '(function (r) { CTL.setRandomSource(function (n) { return new Uint8Array(r(n)); }); ' +
      '})(__hostRandom); delete globalThis.__hostRandom;',
    'random.js',
  );
  const hostObjects = JSON.parse(
    run(
      'JSON.stringify({ crypto: typeof crypto, TextEncoder: typeof TextEncoder, fetch: typeof ' +
        'fetch, setTimeout: typeof setTimeout, process: typeof process })',
      'probe.js',
    ),
  );
  run(suiteScript(suiteSource), 'portable-suite.js');
  const fixturesJson = JSON.stringify(JSON.stringify(fixtures));
  const roleJson = JSON.stringify(o.role ?? 'full');
  const out = await run(
    `var __failures = [];
    run(CTL, function (n, ok, d) { if (!ok) __failures.push(n + ': ' + d); },
      JSON.parse(${fixturesJson}), ${roleJson}, typeof CTLHumanAgent === 'object' ? CTLHumanAgent : undefined)
    .then(function (r) {
      return JSON.stringify({ result: r, failures: __failures, backend: CTL.getCryptoBackendName() });
    })`,
    'run.js',
  );
  const parsed = JSON.parse(out as string);
  if (parsed.failures.length) console.log(parsed.failures.join('\n'));
  return { ...parsed, hostObjects };
}
