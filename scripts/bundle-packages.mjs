// Builds what each npm package runs (README "Packages"). The repository keeps one source tree
// (src/, service-kit/, authority/, gateway/, cli/) and its relative imports; a package carries a
// bundle of the part it runs instead of the tree, so no test, source map or .ts file ships and
// service-kit/ needs no package of its own:
//  - ctl (the root, the SDK): the device commands of bin/ctl.mjs as dist/cli/<command>.js, every
//    library inlined as in the SDK bundles, so its "dependencies" stay empty;
//  - ctl-authority, ctl-gateway, ctl-mcp (workspaces): the command as <dir>/dist/<bin>.mjs with
//    service-kit/ and src/ inlined and its npm libraries left as imports, so they install as the
//    workspace's declared `dependencies` (one copy, audited and updated by npm, native ones such
//    as better-sqlite3 built for the host). An import the workspace does not declare fails the build;
//  - ctl-agent-tools (a library, no bin): one ESM module per entry (<dir>/dist/<entry>.js, a shared
//    chunk beside them) with src/ inlined, its declared and peer libraries left as imports, and
//    the entries' declarations from tsc in <dir>/dist/types.
// Usage: node scripts/bundle-packages.mjs [ctl|licenses|<service workspace dir> ...]   (default: all)
//        node scripts/bundle-packages.mjs <service workspace dir> --out <dir>   (the bundle elsewhere, for a test)
// Each workspace's `prepack` runs it for itself, so `npm pack --workspaces` packs fresh bundles.
import { build } from 'esbuild';
import { spawnSync } from 'node:child_process';
import { copyFileSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildConsole } from './build-console.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));

/** The device commands the SDK package carries (the services' commands come with their packages). */
const DEVICE_COMMANDS = ['keygen', 'root', 'bundle', 'verify', 'human'];

/**
 * Per workspace: the module whose `main(args)` is its bin (`command`) or a module that runs
 * itself (`entry`), and what it serves besides code. `inlineUndeclared`: libraries the package
 * does not declare are inlined, as in the SDK bundles (the MCP server needs only the SDK's own
 * crypto beside its two declared libraries); otherwise every library stays an import and must
 * be declared.
 */
const SERVICES = {
  authority: { command: 'cli/authority.ts' },
  gateway: { command: 'cli/gateway.ts', console: true },
  mcp: { entry: 'mcp/main.ts', inlineUndeclared: true },
};

/**
 * Libraries: the modules each entry point of the package's `exports` is built from. Every import
 * of a library the package does not declare (in `dependencies` or `peerDependencies`) is inlined;
 * the frameworks stay peers, so the application's own copy of `ai` or `@langchain/core` is used.
 */
const LIBRARIES = {
  'agent-tools': { entries: ['agent-tools/ai.ts', 'agent-tools/langchain.ts'] },
};

const common = {
  absWorkingDir: root,
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'esm',
  legalComments: 'none',
  logLevel: 'warning',
};

async function bundleSdkCli() {
  const outdir = join(root, 'dist', 'cli');
  rmSync(outdir, { recursive: true, force: true });
  await build({
    ...common,
    entryPoints: DEVICE_COMMANDS.map((c) => `cli/${c}.ts`),
    outdir,
    splitting: true,
    chunkNames: 'chunks/[name]-[hash]',
  });
}

/** The packages an import names: `@x402/core/http` → `@x402/core`, `viem/accounts` → `viem`. */
const packageOf = (spec) =>
  spec
    .split('/')
    .slice(0, spec.startsWith('@') ? 2 : 1)
    .join('/');

async function bundleService(dir, outdir = join(root, dir, 'dist')) {
  const service = SERVICES[dir];
  if (!service)
    throw new Error(`bundle-packages: no service '${dir}' (known: ctl, ${Object.keys(SERVICES).join(', ')})`);
  const pkg = JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8'));
  const declared = new Set(Object.keys({ ...pkg.dependencies, ...pkg.optionalDependencies }));
  // The bin (bin/<name>.mjs, in git so npm links it before any build) imports dist/<name>.mjs.
  const [bin] = Object.keys(pkg.bin);
  rmSync(outdir, { recursive: true, force: true });
  const result = await build({
    ...common,
    ...(service.entry
      ? { entryPoints: [service.entry] }
      : {
          stdin: {
            contents:
              `import { main } from './${service.command}';\nprocess.exitCode = await main(process.argv.slice(2), ` +
              `'${bin}');\n`,
            resolveDir: root,
            sourcefile: `${bin}.ts`,
            loader: 'ts',
          },
        }),
    outfile: join(outdir, `${bin}.mjs`),
    ...(service.inlineUndeclared
      ? { external: [...declared].flatMap((p) => [p, `${p}/*`]) }
      : { packages: 'external' }),
    metafile: true,
  });
  const imported = new Set(
    Object.values(result.metafile.inputs)
      .flatMap((i) => i.imports)
      .filter((i) => i.external && !i.path.startsWith('node:'))
      .map((i) => packageOf(i.path)),
  );
  const missing = [...imported].filter((p) => !declared.has(p));
  if (missing.length)
    throw new Error(
      `bundle-packages: ${dir}/package.json does not declare ${missing.join(', ')} (imported by its bundle)`,
    );
  // The owner's console, beside the bundle: gateway/routes/console.ts looks for it there.
  if (service.console) await buildConsole(join(outdir, 'console'));
  if (outdir === join(root, dir, 'dist')) copyLicense(dir);
}

async function bundleLibrary(dir, outdir = join(root, dir, 'dist')) {
  const pkg = JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8'));
  const declared = Object.keys({ ...pkg.dependencies, ...pkg.peerDependencies });
  rmSync(outdir, { recursive: true, force: true });
  await build({
    ...common,
    entryPoints: LIBRARIES[dir].entries,
    outdir,
    outbase: dir,
    splitting: true,
    chunkNames: 'chunks/[name]-[hash]',
    external: declared.flatMap((p) => [p, `${p}/*`]),
  });
  // Declarations of the entries and what they name (the SDK's among them), as tsc writes them.
  const tsc = spawnSync(
    process.execPath,
    [
      join(root, 'node_modules', 'typescript', 'bin', 'tsc'),
      '-p',
      join(root, dir, 'tsconfig.build.json'),
      '--declarationDir',
      join(outdir, 'types'),
    ],
    { cwd: root, encoding: 'utf8' },
  );
  if (tsc.status !== 0) throw new Error(`bundle-packages: declarations of ${dir} failed\n${tsc.stdout}${tsc.stderr}`);
  if (outdir === join(root, dir, 'dist')) copyLicense(dir);
}

/** npm ships a LICENSE found at a package's root (not a symlink); the workspace folders keep none in git. */
function copyLicense(dir) {
  copyFileSync(join(root, 'LICENSE'), join(root, dir, 'LICENSE'));
}

const workspaces = () => JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).workspaces;

const args = process.argv.slice(2);
const out = args.indexOf('--out');
if (out >= 0) {
  if (args.length !== 3 || out !== 1)
    throw new Error('bundle-packages: --out takes one service: <service workspace dir> --out <dir>');
  await (LIBRARIES[args[0]] ? bundleLibrary : bundleService)(args[0], args[2]);
} else {
  for (const t of args.length ? args : ['ctl', ...Object.keys(SERVICES), ...Object.keys(LIBRARIES), 'licenses']) {
    if (t === 'ctl') await bundleSdkCli();
    else if (LIBRARIES[t]) await bundleLibrary(t);
    // Every workspace gets the LICENSE (npm ships one found at a package's root).
    else if (t === 'licenses') workspaces().forEach(copyLicense);
    else await bundleService(t);
  }
}
