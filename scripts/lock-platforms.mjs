#!/usr/bin/env node
// The package registry reachable here serves only this platform's builds of packages such as
// rollup, esbuild and deno, so npm leaves the other platforms' optional packages out of
// package-lock.json, and `npm ci` then refuses the lock as out of sync. This adds the missing
// optional entries (version only: npm skips or tolerates optional packages it cannot fetch),
// so `npm ci` works here and on a machine that reaches the full registry.
// Run after any `npm install` that changes the lock: node scripts/lock-platforms.mjs
import { readFileSync, writeFileSync } from 'node:fs';

const path = new URL('../package-lock.json', import.meta.url);
const lock = JSON.parse(readFileSync(path, 'utf8'));
const pkgs = lock.packages;
let added = 0;
for (const [where, meta] of Object.entries(pkgs)) {
  for (const [name, range] of Object.entries(meta.optionalDependencies ?? {})) {
    // npm resolves a dependency next to its dependent first, then at the top level.
    const nested = `${where ? where + '/' : ''}node_modules/${name}`;
    const top = `node_modules/${name}`;
    if (pkgs[nested] || pkgs[top]) continue;
    pkgs[top] = { version: String(range).replace(/^[\^~=]/, ''), dev: meta.dev || undefined, optional: true };
    added++;
  }
}
const sorted = Object.fromEntries(Object.entries(pkgs).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a < b ? -1 : a > b ? 1 : 0)));
lock.packages = sorted;
writeFileSync(path, JSON.stringify(lock, null, 2) + '\n');
console.log(`lock-platforms: ${added} optional platform entries added`);
