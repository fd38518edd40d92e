// Transpiles every TypeScript source of the repository (SDK, services, bridge, CLI, tests) to
// build/, one file per file, so Node 20 can run them. Type checking is `npm run typecheck`;
// the published SDK bundles come from rollup (`npm run build`).
import { build } from 'esbuild';
import { readdirSync, statSync, existsSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildConsole } from './build-console.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
// Under the test runner (CTL_TEST_RUNNER, set by scripts/test.mjs for every test process) build/
// was compiled before the first test started: a test that starts `npm start` or `npm pack` (whose
// prepare script compiles) must not rewrite modules that parallel tests are importing.
const roots = [
  'src',
  'authority',
  'gateway',
  'service-kit',
  'firmware-bridge',
  'cli',
  'mcp',
  'agent-tools',
  'test',
  'examples',
];

function collect(dir, out, ending = '.ts') {
  if (!existsSync(dir)) return out;
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) collect(path, out, ending);
    else if (name.endsWith(ending) && !name.endsWith('.d.ts')) out.push(relative(root, path));
  }
  return out;
}

if (process.env.CTL_TEST_RUNNER) {
  console.error('compile: skipped under the test runner (build/ is compiled before the tests start)');
} else {
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
  // A test removed or renamed in the sources must not keep running from an old output.
  for (const out of collect(join(root, 'build', 'test'), [], '.test.js')) {
    if (!existsSync(join(root, out.slice('build/'.length).replace(/\.js$/, '.ts')))) rmSync(join(root, out));
  }
  // The console the gateway serves at /console (bundled for browsers, not one file per file).
  await buildConsole(join(root, 'build', 'console'));
  // Every compile records when it ran: `npm start` (scripts/run.mjs) compiles again only when a
  // source is newer, so a start launched while tests read build/ never rewrites it under them.
  writeFileSync(join(root, 'build', '.compiled'), `${new Date().toISOString()}\n`);
}
