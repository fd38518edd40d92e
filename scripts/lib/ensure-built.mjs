// What the tests import besides build/ (scripts/compile.mjs): every file the SDK's `exports` name
// (the rollup bundles and the tsc declarations in dist/types), the SDK's device commands
// (dist/cli, for the package tests) and ctl-agent-tools' bundle (agent-tools/dist, which
// `import 'ctl-agent-tools/ai'` loads). Each is rebuilt when one of its outputs is missing or older
// than its newest input, so `npm install && npm test` on a fresh clone needs no `npm run build`.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** Code and configuration: a README or the LICENSE a build copies in is no input. */
const SOURCE = /\.(ts|mts|js|mjs|json)$/;

/** Newest modification time of the sources under `path` (a file or a folder; builds and installs left out). */
function newest(path) {
  if (!existsSync(path)) return 0;
  const st = statSync(path);
  if (!st.isDirectory()) return SOURCE.test(path) ? st.mtimeMs : 0;
  let t = 0;
  for (const name of readdirSync(path)) {
    if (name === 'dist' || name === 'node_modules') continue;
    t = Math.max(t, newest(join(path, name)));
  }
  return t;
}

/** The builds, each with its inputs, outputs and command (paths from the repository root). */
function builds(root) {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  const targets = Object.values(pkg.exports)
    .flatMap((t) => (typeof t === 'string' ? [t] : Object.values(t)))
    .map((t) => t.replace(/^\.\//, ''))
    .filter((t) => t.startsWith('dist/'));
  const agentTools = JSON.parse(readFileSync(join(root, 'agent-tools', 'package.json'), 'utf8'));
  const agentTargets = Object.values(agentTools.exports)
    .flatMap((t) => (typeof t === 'string' ? [t] : Object.values(t)))
    .map((t) => join('agent-tools', t.replace(/^\.\//, '')))
    .filter((t) => t.startsWith(join('agent-tools', 'dist')));
  const node = (script, ...args) => [process.execPath, join(root, script), ...args];
  return [
    {
      what: 'the SDK bundles (rollup -c)',
      inputs: ['src', 'rollup.config.mjs'],
      outputs: targets.filter((t) => !t.endsWith('.d.ts')),
      command: node('node_modules/rollup/dist/bin/rollup', '-c', '--silent'),
    },
    {
      what: 'the SDK declarations (dist/types, tsc -p tsconfig.build.json)',
      inputs: ['src', 'tsconfig.build.json', 'tsconfig.json'],
      outputs: targets.filter((t) => t.endsWith('.d.ts')),
      command: node('node_modules/typescript/bin/tsc', '-p', 'tsconfig.build.json'),
    },
    {
      what: "the SDK's device commands (dist/cli)",
      inputs: ['src', 'cli', 'service-kit', 'scripts/bundle-packages.mjs'],
      outputs: ['keygen', 'root', 'bundle', 'verify', 'human'].map((c) => `dist/cli/${c}.js`),
      command: node('scripts/bundle-packages.mjs', 'ctl'),
    },
    {
      what: 'ctl-agent-tools (agent-tools/dist)',
      inputs: ['src', 'agent-tools', 'scripts/bundle-packages.mjs'],
      outputs: agentTargets,
      command: node('scripts/bundle-packages.mjs', 'agent-tools'),
    },
  ];
}

/** Builds what is missing or stale; false (having said which) when a build fails. */
export function ensureBuilt(root) {
  for (const b of builds(root)) {
    const inputTime = Math.max(...b.inputs.map((i) => newest(join(root, i))));
    const stale = b.outputs.filter((o) => !existsSync(join(root, o)) || statSync(join(root, o)).mtimeMs < inputTime);
    if (!stale.length) continue;
    console.log(
      `${stale[0]}${stale.length > 1 ? ` and ${stale.length - 1} more` : ''} missing or stale: building ${b.what}`,
    );
    const r = spawnSync(b.command[0], b.command.slice(1), { cwd: root, stdio: 'inherit' });
    if (r.status !== 0) {
      console.log(`building ${b.what} failed (${r.error?.message ?? `exit ${r.status ?? r.signal}`})`);
      return false;
    }
  }
  return true;
}
