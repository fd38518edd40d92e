// SBA verifications per second on every runtime, each as a ratio of Node (native crypto)
// measured in this same run; QuickJS cold start (fresh engine → dist/ctl.iife.js evaluated →
// first verification done) and its peak heap; the gzip size of dist/ctl.iife.js.
// Issue 5 targets: QuickJS ≥ 50 verifications/s, cold start ≤ 250 ms, dist/ctl.iife.js ≤ 16 KB gzip.
//
//   npm run build && npm run compile && node bench/runtimes.mjs [--seconds 2]
//
// The verification is the offline terminal's: spec §4.4 against a Trust Bundle and root key,
// one grant reused (its signature is cached after the first check, as on a real terminal), a
// fresh SBA signature and expiry checks each time. Every target runs the same script on the same
// fixture; a runtime missing here is printed as SKIPPED.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const seconds = Number(process.argv[process.argv.indexOf('--seconds') + 1]) || 2;
for (const f of ['dist/index.js', 'dist/ctl.iife.js', 'build/firmware-bridge/node/quickjs.js']) {
  if (!existsSync(join(root, f))) {
    console.error(`${f} is missing: run \`npm run build && npm run compile\` first`);
    process.exit(1);
  }
}
const CTL = await import(pathToFileURL(join(root, 'dist/index.js')).href);
const { findRuntime } = await import(pathToFileURL(join(root, 'build/test/runtimes/targets.js')).href);
const { createQuickJsEngine } = await import(pathToFileURL(join(root, 'build/firmware-bridge/node/quickjs.js')).href);
const { createNodeAbi } = await import(pathToFileURL(join(root, 'build/firmware-bridge/node/test-abi.js')).href);

// --- one fixture for every target ---
const T0 = Date.parse('2026-11-22T10:00:00Z');
const iso = (ms) => new Date(ms).toISOString().replace('.000Z', 'Z');
const rootKey = await CTL.generateKeyPair({ alg: 'EdDSA' });
const authority = await CTL.generateKeyPair({ alg: 'EdDSA' });
const wallet = await CTL.generateKeyPair({ alg: 'EdDSA' });
const kid = await CTL.jwkThumbprint(authority.publicJwk);
const bundle = await CTL.createTrustBundle({
  sequence: 1, scope: { category: 'ev-charging' }, revokedGrants: [],
  issuers: [{ issuer: 'authority.example', keys: [{ ...authority.publicJwk, kid, alg: 'EdDSA', purposes: ['grant'] }] }],
  issuedAt: iso(T0 - 3_600_000), expiresAt: iso(T0 + 86_400_000),
}, { signingKey: rootKey.privateKeyPem, issuer: 'root.example' });
const grant = await CTL.createSignedPolicyGrant({
  policyHash: CTL.policyHash({ bench: true }), actorKey: wallet.publicJwk, allowedRails: ['card'],
  allowedAssets: [{ standard: 'iso4217', code: 'EUR' }], maxAmountMinor: '100000', currency: 'EUR',
  issuedAt: iso(T0 - 7_200_000), expiresAt: iso(T0 + 86_400_000),
}, { issuer: 'authority.example', keyId: kid, signingKey: authority.privateKeyPem, revocationBaseUrl: 'https://authority.example' });
const sba = await CTL.createSignedSessionBudgetAuthorization({
  grant, sessionId: 'sess_bench', actorId: 'vehicle-1', maxAmountMinor: '1200', budgetScope: 'TRIP',
  issuedAt: iso(T0 - 1000), expiresAt: iso(T0 + 3_600_000), rail: 'card',
}, { signingKey: wallet.privateKeyPem, now: () => T0 });
const fixture = { sba, bundle, rootPem: rootKey.publicKeyPem, now: T0 };

// The measured body, identical everywhere: verify for `ms` milliseconds (or `n` times), count.
const BODY = `
async function bench(CTL, fx, ms, n) {
  const o = { amount: '1200', currency: 'EUR', offline: true, trustBundles: [fx.bundle], rootPublicKeyPem: fx.rootPem, now: function () { return fx.now; } };
  const first = await CTL.verifyCtl(fx.sba, o);
  if (!first.valid) throw new Error('fixture does not verify: ' + JSON.stringify(first.error));
  let count = 0;
  const start = Date.now();
  while ((n ? count < n : Date.now() - start < ms)) {
    const r = await CTL.verifyCtl(fx.sba, o);
    if (!r.valid) throw new Error(r.error.code);
    count++;
  }
  return { count: count, ms: Date.now() - start, backend: CTL.getCryptoBackendName() };
}`;

const tmp = mkdtempSync(join(tmpdir(), 'ctl-bench-'));
function entry(backend) {
  const file = join(tmp, `bench-${backend}.mjs`);
  writeFileSync(file, `import * as CTL from ${JSON.stringify(pathToFileURL(join(root, 'dist/index.js')).href)};
${BODY}
${backend === 'noble' ? "CTL.setCryptoBackend('noble');" : ''}
const r = await bench(CTL, ${JSON.stringify(fixture)}, ${seconds * 1000}, 0);
console.log('RESULT ' + JSON.stringify(r));`);
  return file;
}
function runProcess(label, exe, args) {
  const out = spawnSync(exe, args, { cwd: tmp, encoding: 'utf8', timeout: 120_000 });
  const line = (out.stdout ?? '').split('\n').find((l) => l.startsWith('RESULT '));
  if (!line) return { label, error: `${out.status} ${out.stderr?.slice(0, 300)}` };
  const r = JSON.parse(line.slice(7));
  return { label, perSecond: (r.count * 1000) / r.ms, backend: r.backend };
}

const rows = [];
rows.push(runProcess('node (native crypto)', process.execPath, [entry('native')]));
rows.push(runProcess('node (noble)', process.execPath, [entry('noble')]));
for (const name of ['bun', 'deno']) {
  const exe = findRuntime(name);
  if (!exe) rows.push({ label: name, skipped: `no ${name} binary` });
  else rows.push(runProcess(name, exe, name === 'deno' ? ['run', '--quiet', '--no-config', '--allow-read', entry('auto')] : [entry('auto')]));
}

// QuickJS: cold start measured from a fresh runtime (the WASM module is loaded once, first,
// and reported apart: a firmware links QuickJS natively and has no such step).
const iife = readFileSync(join(root, 'dist/ctl.iife.js'), 'utf8');
const wasmStart = performance.now();
await (await import('quickjs-emscripten')).getQuickJS();
const wasmMs = performance.now() - wasmStart;
const coldStart = performance.now();
const engine = await createQuickJsEngine({ abi: createNodeAbi({ now: T0 }) });
engine.evalScript(iife, 'ctl.iife.js');
const loadedMs = performance.now() - coldStart;
engine.evalScript(`CTL.setRandomSource(function (n) { return new Uint8Array(ctlHost.randomBytes(n)); });${BODY}; var fx = ${JSON.stringify(fixture)};`, 'bench.js');
engine.evalSync("CTL.verifyCtl(fx.sba, { amount: '1200', currency: 'EUR', offline: true, trustBundles: [fx.bundle], rootPublicKeyPem: fx.rootPem, now: function () { return fx.now; } }).then(function (r) { if (!r.valid) throw new Error(r.error.code); return r.valid; })");
const coldMs = performance.now() - coldStart;
const qStart = performance.now();
const q = engine.evalSync(`bench(CTL, fx, ${seconds * 1000}, 0)`);
const qWall = performance.now() - qStart;
const mem = engine.memory();
engine.dispose();
rows.push({ label: 'quickjs (dist/ctl.iife.js)', perSecond: (q.count * 1000) / qWall, backend: q.backend });

const base = rows[0].perSecond;
console.log(`SBA verifications per second (${seconds} s each, one run; ratio = target / node native)\n`);
console.log('target'.padEnd(30) + 'verif/s'.padStart(10) + 'ratio'.padStart(9) + '  backend');
for (const r of rows) {
  if (r.skipped) console.log(`SKIPPED ${r.label}: ${r.skipped}`);
  else if (r.error) console.log(`${r.label.padEnd(30)}  FAILED ${r.error}`);
  else console.log(r.label.padEnd(30) + r.perSecond.toFixed(0).padStart(10) + (r.perSecond / base).toFixed(3).padStart(9) + '  ' + r.backend);
}
const gz = gzipSync(readFileSync(join(root, 'dist/ctl.iife.js'))).length;
const qps = rows.at(-1).perSecond;
console.log(`\nQuickJS cold start: ${coldMs.toFixed(0)} ms (new runtime → dist/ctl.iife.js evaluated in ${loadedMs.toFixed(0)} ms → first verification done); WASM module load before it: ${wasmMs.toFixed(0)} ms`);
console.log(`QuickJS peak heap: ${(mem.peakBytes / 1024).toFixed(0)} KiB (sampled at every job drain), ${(mem.usedBytes / 1024).toFixed(0)} KiB at the end`);
console.log(`dist/ctl.iife.js: ${(gz / 1024).toFixed(1)} KiB gzip`);
const verdict = (ok) => (ok ? 'met' : 'MISSED');
console.log(`\nTargets: QuickJS ≥ 50 verif/s: ${verdict(qps >= 50)} (${qps.toFixed(0)}); cold start ≤ 250 ms: ${verdict(coldMs <= 250)} (${coldMs.toFixed(0)} ms); iife ≤ 16 KiB gzip: ${verdict(gz <= 16 * 1024)} (${(gz / 1024).toFixed(1)} KiB)`);
rmSync(tmp, { recursive: true, force: true });
