#!/usr/bin/env node
// The package registry reachable here serves only this platform's builds of packages such as
// rollup, esbuild, deno and @foundry-rs/anvil (a 40 MB binary per platform), so npm leaves the
// other platforms' optional packages out of package-lock.json, and `npm ci` then refuses the lock
// as out of sync. This adds the missing optional entries (version only: npm skips or tolerates
// optional packages it cannot fetch), so `npm ci` works here and on a machine that reaches the
// full registry.
// The lock is written exactly as npm writes it (json-stringify-nice with npm's key order, as
// @npmcli/arborist's Shrinkwrap does), so a later `npm install` finds nothing to rewrite.
// Run after any `npm install` that changes the lock: node scripts/lock-platforms.mjs [LOCKFILE]
import { readFileSync, writeFileSync } from 'node:fs';

const path = process.argv[2] ?? new URL('../package-lock.json', import.meta.url);
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
writeFileSync(path, npmLockText(lock));
console.log(`lock-platforms: ${added} optional platform entries added`);

/**
 * npm's lockfile text: every object's keys sorted, plain values before objects, npm's own keys
 * first in its order, the rest by `localeCompare(…, 'en')` (not code units: `koa__router` sorts
 * before `koa-compose` there); two-space indent and a final newline.
 */
function npmLockText(data) {
  const first = ['name', 'version', 'lockfileVersion', 'resolved', 'integrity', 'requires', 'packages', 'dependencies'];
  const isObj = (v) => !!v && typeof v === 'object' && !Array.isArray(v);
  const rank = (k) => (first.includes(k) ? first.indexOf(k) : first.length);
  const compare = (a, b) => rank(a) - rank(b) || (rank(a) === first.length ? a.localeCompare(b, 'en') : 0);
  const sorted = (_key, value) =>
    !isObj(value)
      ? value
      : Object.fromEntries(
          Object.entries(value).sort(([ak, av], [bk, bv]) =>
            isObj(av) === isObj(bv) ? compare(ak, bk) : isObj(av) ? 1 : -1,
          ),
        );
  return `${JSON.stringify(data, sorted, 2)}\n`;
}
