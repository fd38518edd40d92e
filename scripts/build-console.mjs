// Builds the budget owner's console (gateway/console/) into a folder: one ES module bundle (the
// console's TypeScript and the SDK's receipt verifier, nothing fetched from elsewhere), its
// stylesheet, page and icon. The gateway serves exactly these files at /console (routes/console.ts)
// from build/console/ (compile.mjs) or, in the ctl-gateway package, dist/console/ (bundle-packages.mjs).
import { build } from 'esbuild';
import { copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const src = join(root, 'gateway', 'console');

/** @example await buildConsole(join(root, 'build', 'console')) */
export async function buildConsole(out) {
  mkdirSync(out, { recursive: true });
  await build({
    absWorkingDir: root,
    entryPoints: [join(src, 'main.ts')],
    outfile: join(out, 'console.js'),
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: ['chrome111', 'firefox111', 'safari16.4'],
    minify: true,
    legalComments: 'none',
    logLevel: 'warning',
  });
  for (const f of ['index.html', 'console.css', 'favicon.svg']) copyFileSync(join(src, f), join(out, f));
}
