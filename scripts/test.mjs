// Runs every compiled test file (build/test/**/*.test.js) in its own Node process, so one file
// that crashes cannot hide the others, and prints the one closing line CI reads:
// `N passed, N failed` (uvu's own per-file summary is parsed, not trusted to be last).
// Usage: node scripts/test.mjs [substring filter ...]   CTL_TEST_JOBS=N (default 2)
import { spawn, spawnSync } from 'node:child_process';
import { readdirSync, statSync, existsSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const testRoot = join(root, 'build', 'test');
const filters = process.argv.slice(2);
const jobs = Math.max(1, Number(process.env.CTL_TEST_JOBS) || 2);

function collect(dir, out) {
  if (!existsSync(dir)) return out;
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) collect(path, out);
    else if (name.endsWith('.test.js')) out.push(path);
  }
  return out;
}

// The runtime and firmware-bridge tests run the built bundles: build them when missing or older
// than the source, so `npm install && npm test` works on a fresh machine.
function newest(dir) {
  let t = 0;
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    const st = statSync(path);
    t = Math.max(t, st.isDirectory() ? newest(path) : st.mtimeMs);
  }
  return t;
}
const distFile = join(root, 'dist', 'ctl.iife.js');
if (!existsSync(distFile) || statSync(distFile).mtimeMs < newest(join(root, 'src'))) {
  console.log('dist/ is missing or older than src/: building it (rollup -c)');
  const r = spawnSync(process.execPath, [join(root, 'node_modules', 'rollup', 'dist', 'bin', 'rollup'), '-c', '--silent'], { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) {
    console.log('0 passed, 1 failed');
    process.exit(1);
  }
}

const files = collect(testRoot, []).filter((f) => filters.length === 0 || filters.some((s) => f.includes(s)));
const strip = (s) => s.replace(/\x1b\[[0-9;]*m/g, '');

function runFile(file) {
  return new Promise((resolve) => {
    const started = Date.now();
    const child = spawn(process.execPath, ['--enable-source-maps', file], {
      cwd: root,
      env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('close', (code) => {
      const text = strip(out);
      const total = Number(/Total:\s+(\d+)/.exec(text)?.[1] ?? NaN);
      const passed = Number(/Passed:\s+(\d+)/.exec(text)?.[1] ?? NaN);
      const skipped = Number(/Skipped:\s+(\d+)/.exec(text)?.[1] ?? 0);
      let result;
      if (Number.isNaN(total) || Number.isNaN(passed)) {
        // No summary: the file crashed before or while running its suites.
        result = { passed: 0, failed: 1, skipped: 0, crashed: true };
      } else {
        const failed = total - passed - skipped + (code !== 0 && total === passed + skipped ? 1 : 0);
        result = { passed, failed, skipped };
      }
      resolve({ file: relative(root, file), code, text, ms: Date.now() - started, ...result });
    });
  });
}

const results = [];
let next = 0;
async function worker() {
  while (next < files.length) {
    const file = files[next++];
    const r = await runFile(file);
    results.push(r);
    const mark = r.failed ? 'FAIL' : 'ok  ';
    console.log(`${mark} ${r.file}  (${r.passed} passed, ${r.failed} failed${r.skipped ? `, ${r.skipped} skipped` : ''}, ${r.ms} ms)`);
    if (r.failed) console.log(r.text.split('\n').map((l) => '     ' + l).join('\n'));
    const skipLines = r.text.split('\n').filter((l) => l.startsWith('SKIPPED'));
    for (const l of skipLines) console.log('     ' + l);
  }
}
await Promise.all(Array.from({ length: Math.min(jobs, files.length) }, worker));

const passed = results.reduce((a, r) => a + r.passed, 0);
const failed = results.reduce((a, r) => a + r.failed, 0);
const skipped = results.reduce((a, r) => a + r.skipped, 0);
if (files.length === 0) console.log('no test files found under build/test');
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
process.exit(failed > 0 || files.length === 0 ? 1 : 0);
