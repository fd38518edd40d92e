/**
 * The device script for QuickJS: firmware-bridge/device-entry.ts bundled as one classic script
 * (IIFE) that runs after dist/ctl.iife.js and takes the SDK from its global `CTL`, so the SDK is
 * not carried twice. Built with esbuild from the repository's TypeScript (a dev tool, like this
 * reference host); cached next to the compiled bridge.
 */
import { existsSync, readFileSync, renameSync, statSync, writeFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root: the nearest ancestor with package.json (from build/… or from the sources). */
export const root = (() => {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json')) && dirname(dir) !== dir) dir = dirname(dir);
  return dir;
})();

/** Which SDK bundle a device loads: the verifier alone, the wallet alone, or everything. */
export type DeviceBundle = 'verify' | 'wallet' | 'full';

/**
 * The IIFE of each role (global `CTL`), and the opt-in modules: pure-JS P-256 (`CTLP256`), the Human-Agent profile
 * (`CTLHumanAgent`).
 */
export const IIFE_FILES: Record<DeviceBundle | 'p256' | 'human-agent', string> = {
  verify: 'ctl-verify.iife.js',
  wallet: 'ctl-wallet.iife.js',
  full: 'ctl.iife.js',
  p256: 'ctl-p256.iife.js',
  'human-agent': 'ctl-human-agent.iife.js',
};

/** dist/ctl.iife.js (or a role's bundle), or a clear error telling to build it. */
export function readIife(bundle: DeviceBundle | 'p256' | 'human-agent' = 'full'): string {
  const path = join(root, 'dist', IIFE_FILES[bundle]);
  if (!existsSync(path)) throw new Error(`${path} is missing: run \`npm run build\` first`);
  return readFileSync(path, 'utf8');
}

/**
 * Fails loudly when the IIFE defined no global: a minifier run in module mode drops the
 * top-level `var CTL = …` as unused (terser `module: true`), leaving `!function(t){…}({})`.
 */
export function assertGlobalCtl(engine: { evalSync(expression: string): unknown }): void {
  if (engine.evalSync('typeof CTL') !== 'object') {
    throw new Error(
      'dist/ctl.iife.js defines no global CTL (was it minified with terser `module: true`? ' +
        'the IIFE build needs `module: false`)',
    );
  }
}

/** The bundled device script (built on first use, rebuilt when device sources are newer). */
export async function deviceScript(): Promise<string> {
  const out = join(root, 'build', 'firmware-bridge', 'device.iife.js');
  const srcDir = join(root, 'firmware-bridge');
  const newest = [
    'device-entry.ts',
    'device.ts',
    'log-ops.ts',
    'protocol.ts',
    'kv-spend-storage.ts',
    'sequence-store.ts',
    'abi.ts',
  ]
    .map((f) => statSync(join(srcDir, f)).mtimeMs)
    .concat(statSync(join(root, 'src', 'encoding', 'cbor.ts')).mtimeMs)
    .reduce((a, b) => Math.max(a, b), 0);
  if (existsSync(out) && statSync(out).mtimeMs >= newest) return readFileSync(out, 'utf8');
  const { build } = await import('esbuild');
  const r = await build({
    absWorkingDir: root,
    entryPoints: [join(srcDir, 'device-entry.ts')],
    bundle: true,
    format: 'iife',
    platform: 'neutral',
    mainFields: ['module', 'main'],
    conditions: ['default'],
    target: 'es2020',
    minify: true,
    write: false,
    logLevel: 'error',
  });
  const code = r.outputFiles[0]!.text;
  mkdirSync(dirname(out), { recursive: true });
  // Temp file + rename: test files running in parallel may read it while another writes it.
  const tmp = `${out}.${process.pid}.tmp`;
  writeFileSync(tmp, code);
  renameSync(tmp, out);
  return code;
}
