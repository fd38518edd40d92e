// `npm start`, `npm run authority|gateway|demo`: compiles when a source changed since the last
// compile, then runs `ctl <args>` in this same process. The npm scripts `exec` this file so
// npm's child is this node process itself: a shell left between npm and node (dash keeps one for
// `sh -c "a && b"`, even for a single command) would not pass on the SIGTERM a supervisor sends
// to npm, and the services would keep running.
// Usage: node scripts/run.mjs <ctl command> [args]
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const stamp = join(root, 'build', '.compiled');
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

function newestSource(dir) {
  let t = 0;
  if (!existsSync(dir)) return t;
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    const st = statSync(path);
    if (st.isDirectory()) t = Math.max(t, newestSource(path));
    else if (name.endsWith('.ts')) t = Math.max(t, st.mtimeMs);
  }
  return t;
}

// Skipping an unneeded compile keeps start fast and leaves build/ untouched while other
// processes read it (compile.mjs itself never runs under the test runner).
const newest = Math.max(...roots.map((r) => newestSource(join(root, r))));
if (!existsSync(stamp) || statSync(stamp).mtimeMs < newest) {
  await import('./compile.mjs');
}
process.argv = [process.argv[0], join(root, 'bin', 'ctl.mjs'), ...process.argv.slice(2)];
await import('../bin/ctl.mjs');
