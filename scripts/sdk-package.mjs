// The SDK package `ctl` as it is published: a directory holding what a consumer needs and a
// manifest written for it, packed or published from there (`npm pack ./pack/ctl`,
// `npm publish ./pack/ctl`). The repository's own package.json is the developer's: its scripts
// (a `prepare` that compiles), workspaces and devDependencies stay in the clone; the published
// manifest has none of them, so installing `ctl` runs no script and pulls no dependency.
// It carries dist/ (the bundles with their source maps, the declarations, the device commands),
// bin/ctl.mjs, README.md and LICENSE.
// Usage: node scripts/sdk-package.mjs [--out <dir>]   (default ./pack/ctl; after `npm run build`)
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const args = process.argv.slice(2);
const outAt = args.indexOf('--out');
if (args.length && (outAt !== 0 || args.length !== 2)) {
  console.error('usage: node scripts/sdk-package.mjs [--out <dir>]');
  process.exit(2);
}
const out = resolve(outAt === 0 ? args[1] : join(root, 'pack', 'ctl'));

/** What a consumer's npm reads: identity, entry points, the bin; nothing that runs at install. */
const PUBLISHED = [
  'name',
  'version',
  'description',
  'license',
  'keywords',
  'homepage',
  'repository',
  'bugs',
  'author',
  'type',
  'engines',
  'main',
  'module',
  'types',
  'exports',
  'bin',
  'sideEffects',
];

const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
if (Object.keys(pkg.dependencies ?? {}).length)
  throw new Error('sdk-package: the SDK has runtime dependencies; list them in the published manifest first');
// Every file `exports` names (ctl, ctl/wallet, ctl/server…), and the device commands.
const targets = Object.values(pkg.exports).flatMap((t) => (typeof t === 'string' ? [t] : Object.values(t)));
for (const f of [...targets.map((t) => t.replace(/^\.\//, '')), 'dist/cli']) {
  if (!existsSync(join(root, f))) throw new Error(`sdk-package: ${f} is missing: run \`npm run build\` first`);
}
const manifest = Object.fromEntries(PUBLISHED.filter((k) => pkg[k] !== undefined).map((k) => [k, pkg[k]]));
manifest.files = ['dist', 'bin'];

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
cpSync(join(root, 'dist'), join(out, 'dist'), { recursive: true });
mkdirSync(join(out, 'bin'));
cpSync(join(root, 'bin', 'ctl.mjs'), join(out, 'bin', 'ctl.mjs'));
for (const f of ['README.md', 'LICENSE']) cpSync(join(root, f), join(out, f));
writeFileSync(join(out, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
console.log(out);
