/**
 * How the runtime tests and bench/runtimes.mjs reach each target: the Bun and Deno binaries that
 * the npm packages ship (or the PATH), and QuickJS with dist/ctl.iife.js and the firmware ABI.
 */
import { spawnSync } from 'node:child_process';
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

/**
 * Runs the portable suite inside QuickJS: dist/ctl.iife.js, then the SDK's randomness from the
 * firmware ABI (setRandomSource), then the suite as a classic script.
 */
export async function runInQuickJs(iife: string, suiteSource: string, fixtures: unknown): Promise<QuickJsRun> {
  const engine = await createQuickJsEngine({ abi: createNodeAbi() });
  try {
    engine.evalScript(iife, 'ctl.iife.js');
    assertGlobalCtl(engine);
    engine.evalScript('CTL.setRandomSource(function (n) { return new Uint8Array(ctlHost.randomBytes(n)); });', 'random.js');
    const hostObjects = engine.evalSync(
      '({ crypto: typeof crypto, TextEncoder: typeof TextEncoder, fetch: typeof fetch, setTimeout: typeof setTimeout, process: typeof process, ctlHost: typeof ctlHost })',
    ) as Record<string, string>;
    const script = suiteSource.replace(/^export async function run\(/m, 'async function run(');
    if (script === suiteSource) throw new Error('portable-suite.mjs: `export async function run(` not found');
    engine.evalScript(script, 'portable-suite.js');
    engine.evalScript(`var __fixtures = ${JSON.stringify(fixtures)}; var __failures = [];`, 'fixtures.js');
    const result = engine.evalSync("run(CTL, function (n, ok, d) { if (!ok) __failures.push(n + ': ' + d); }, __fixtures)") as QuickJsRun['result'];
    const failures = engine.evalSync('__failures') as string[];
    const backend = engine.evalSync('CTL.getCryptoBackendName()') as string;
    if (failures.length) console.log(failures.join('\n'));
    return { result, failures, hostObjects, backend };
  } finally {
    engine.dispose();
  }
}
