// Transpiles every TypeScript source of the repository (SDK, services, bridge, CLI, tests) to
// build/, one file per file, so Node 20 can run them. Type checking is `npm run typecheck`;
// the published SDK bundles come from rollup (`npm run build`).
import { build } from 'esbuild';
import { readdirSync, statSync, existsSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const roots = ['src', 'authority', 'gateway', 'service-kit', 'firmware-bridge', 'cli', 'test', 'examples'];

function collect(dir, out) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) collect(path, out);
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(relative(root, path));
  }
  return out;
}

const entryPoints = roots.filter((r) => existsSync(join(root, r))).flatMap((r) => collect(join(root, r), []));
await build({
  absWorkingDir: root,
  entryPoints,
  outdir: 'build',
  outbase: '.',
  bundle: false,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  sourcemap: 'inline',
  logLevel: 'warning',
});
