#!/usr/bin/env node
// Summarises a V8 .cpuprofile (node --cpu-prof) by self time: per module (npm package, our own
// build/ directory, node internals, GC, idle) and the top functions.
//
//   BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" BENCH_SECONDS=5 node bench/gateway.mjs
//   node bench/profile-summary.mjs /tmp/prof/CPU.*.cpuprofile [--top 25]
import { readFileSync } from 'node:fs';

const files = process.argv.slice(2).filter((a) => a.endsWith('.cpuprofile'));
const topIdx = process.argv.indexOf('--top');
const top = topIdx > 0 ? Number(process.argv[topIdx + 1]) : 25;
if (!files.length) throw new Error('usage: node bench/profile-summary.mjs <file.cpuprofile…> [--top N]');

/** Where a function lives: "pkg" for node_modules, "ours:gateway/…" for build/, node internals, V8 pseudo-frames. */
function moduleOf(url, name) {
  if (!url) return name.startsWith('(') ? name : '(native)';
  if (url.startsWith('node:')) {
    const path = url.slice(5);
    return `node:${path.split('/')[0] === 'internal' ? path.split('/').slice(0, 2).join('/') : path}`;
  }
  const nm = url.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + 14).split('/');
    return rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0];
  }
  const b = url.indexOf('/build/');
  if (b >= 0)
    return `ours:${url
      .slice(b + 7)
      .split('/')
      .slice(0, 2)
      .join('/')}`;
  return url.replace(/^file:\/\//, '');
}

const byModule = new Map();
const byFunction = new Map();
let total = 0;
for (const f of files) {
  const prof = JSON.parse(readFileSync(f, 'utf8'));
  const nodes = new Map(prof.nodes.map((n) => [n.id, n]));
  for (let i = 0; i < prof.samples.length; i++) {
    const dt = prof.timeDeltas[i] ?? 0;
    const n = nodes.get(prof.samples[i]);
    const { functionName, url, lineNumber } = n.callFrame;
    const name = functionName || '(anonymous)';
    const mod = moduleOf(url, name);
    byModule.set(mod, (byModule.get(mod) ?? 0) + dt);
    const key = `${name}  ${url ? `${url.replace(/^.*\/(node_modules|build)\//, '$1/')}:${lineNumber + 1}` : ''}`;
    byFunction.set(key, (byFunction.get(key) ?? 0) + dt);
    total += dt;
  }
}
const busy = total - (byModule.get('(idle)') ?? 0);
const show = (title, map, n) => {
  console.log(`\n${title} (self time; % of all samples / % of non-idle)`);
  for (const [k, us] of [...map].sort((a, b) => b[1] - a[1]).slice(0, n))
    console.log(
      `${(us / 1000).toFixed(0).padStart(8)} ms ${((us / total) * 100).toFixed(1).padStart(5)}% ` +
        `${k === '(idle)' ? '     ' : `${((us / busy) * 100).toFixed(1).padStart(5)}%`}  ${k}`,
    );
};
console.log(`${files.length} profile(s), ${(total / 1e6).toFixed(1)} s sampled, ${(busy / 1e6).toFixed(1)} s not idle`);
show('by module', byModule, 30);
show('top functions', byFunction, top);
