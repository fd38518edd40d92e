// SBA verifications per second on every runtime, each as a ratio of Node (native crypto)
// measured in this same run; QuickJS cold start (fresh engine → dist/ctl.iife.js evaluated →
// first verification done) and its peak heap; the gzip size of dist/ctl.iife.js.
// Targets: QuickJS ≥ 50 verifications/s, cold start ≤ 250 ms (the size is reported, not a target).
//
// Device-class targets, on the verifier bundle dist/ctl-verify.iife.js in QuickJS (all in this run):
// heap footprint (memory_used_size after the bundle + 100 offline verifications, minus an empty
// runtime + context) ≤ 160 KiB; cold start (new runtime → bundle evaluated → first offline
// verification valid), best of 5, ≤ 25 ms; verifications/s ≥ 0.9 × a bare noble Ed25519 verify
// in QuickJS.
//
// Where the verifier bundle's QuickJS heap goes (computeMemoryUsage after evaluating
// dist/ctl-verify.iife.js alone): 271 KiB over an empty context before its Ed25519 verify left
// noble, 219 KiB after, 192 KiB once the IIFEs stopped inlining single-use functions into their
// callers (terser `reduce_funcs: false`, rollup.config.mjs). QuickJS keeps every live function's
// source text for Function.prototype.toString, so an inlined function was kept twice; the source
// text is now about the bundle's size (~47 KB), bytecode ~29 KB, line tables ~14 KB, atoms ~28 KB,
// objects, properties and shapes ~30 KB. quickjs-emscripten cannot drop source and line tables,
// but a firmware can: JS_SetStripInfo(rt, JS_STRIP_SOURCE | JS_STRIP_DEBUG) in a native QuickJS
// (2025-09-13, x86-64, measured outside this repository) took the same bundle + 100 verifications
// from 249 to 181 KiB (firmware-bridge/README.md § Memory).
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
const bundle = await CTL.createTrustBundle(
  {
    sequence: 1,
    scope: { category: 'ev-charging' },
    revokedGrants: [],
    issuers: [
      { issuer: 'authority.example', keys: [{ ...authority.publicJwk, kid, alg: 'EdDSA', purposes: ['grant'] }] },
    ],
    issuedAt: iso(T0 - 3_600_000),
    expiresAt: iso(T0 + 86_400_000),
  },
  { signingKey: rootKey.privateKeyPem, issuer: 'root.example' },
);
const grant = await CTL.createSignedPolicyGrant(
  {
    policyHash: CTL.policyHash({ bench: true }),
    actorKey: wallet.publicJwk,
    allowedRails: ['card'],
    allowedAssets: [{ standard: 'iso4217', code: 'EUR' }],
    maxAmountMinor: '100000',
    currency: 'EUR',
    issuedAt: iso(T0 - 7_200_000),
    expiresAt: iso(T0 + 86_400_000),
  },
  {
    issuer: 'authority.example',
    keyId: kid,
    signingKey: authority.privateKeyPem,
    revocationBaseUrl: 'https://authority.example',
  },
);
const sba = await CTL.createSignedSessionBudgetAuthorization(
  {
    grant,
    sessionId: 'sess_bench',
    actorId: 'vehicle-1',
    maxAmountMinor: '1200',
    budgetScope: 'TRIP',
    issuedAt: iso(T0 - 1000),
    expiresAt: iso(T0 + 3_600_000),
    rail: 'card',
  },
  { signingKey: wallet.privateKeyPem, now: () => T0 },
);
const fixture = { sba, bundle, rootPem: rootKey.publicKeyPem, now: T0 };

// The measured body, identical everywhere: verify for `ms` milliseconds (or `n` times), count.
const BODY = `
async function bench(CTL, fx, ms, n) {
  const spendStorage = {
    reserve: function () { return 'reserved'; },
    commit: function () {},
    release: function () {},
    total: function () { return 0n; },
  };
  const o = {
    amount: '1200',
    currency: 'EUR',
    offline: true,
    spendStorage: spendStorage,
    trustBundles: [fx.bundle],
    rootPublicKeyPem: fx.rootPem,
    now: function () { return fx.now; },
  };
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
  writeFileSync(
    file,
    `import * as CTL from ${JSON.stringify(pathToFileURL(join(root, 'dist/index.js')).href)};
${BODY}
${backend === 'noble' ? "CTL.setCryptoBackend('noble');" : ''}
const r = await bench(CTL, ${JSON.stringify(fixture)}, ${seconds * 1000}, 0);
console.log('RESULT ' + JSON.stringify(r));`,
  );
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
  else
    rows.push(
      runProcess(
        name,
        exe,
        name === 'deno' ? ['run', '--quiet', '--no-config', '--allow-read', entry('auto')] : [entry('auto')],
      ),
    );
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
engine.evalScript(
  'CTL.setRandomSource(function (n) { return new Uint8Array(ctlHost.randomBytes(n)); ' +
    `});${BODY}; var fx = ${JSON.stringify(fixture)};`,
  'bench.js',
);
engine.evalSync(
  "CTL.verifyCtl(fx.sba, { amount: '1200', currency: 'EUR', offline: true, spendStorage: " +
    "{ reserve: function () { return 'reserved'; }, commit: function () {}, release: function " +
    '() {}, total: function () { return 0n; } }, trustBundles: [fx.bundle], rootPublicKeyPem: ' +
    'fx.rootPem, now: function () { return fx.now; } }).then(function (r) { if (!r.valid) ' +
    'throw new Error(r.error.code); return r.valid; })',
);
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
  else
    console.log(
      r.label.padEnd(30) +
        r.perSecond.toFixed(0).padStart(10) +
        (r.perSecond / base).toFixed(3).padStart(9) +
        '  ' +
        r.backend,
    );
}
const gz = gzipSync(readFileSync(join(root, 'dist/ctl.iife.js'))).length;
const qps = rows.at(-1).perSecond;
console.log(
  `\nQuickJS cold start: ${coldMs.toFixed(0)} ms (new runtime → dist/ctl.iife.js evaluated ` +
    `in ${loadedMs.toFixed(0)} ms → first verification done); WASM module load before ` +
    `it: ${wasmMs.toFixed(0)} ms`,
);
console.log(
  `QuickJS peak heap: ${(mem.peakBytes / 1024).toFixed(0)} KiB (sampled at every job ` +
    `drain), ${(mem.usedBytes / 1024).toFixed(0)} KiB at the end`,
);
console.log(`dist/ctl.iife.js: ${(gz / 1024).toFixed(1)} KiB gzip`);
const verdict = (ok) => (ok ? 'met' : 'MISSED');

// --- the device-class SDK: dist/ctl-verify.iife.js in QuickJS ---
const OPTS =
  "{ amount: '1200', currency: 'EUR', offline: true, spendStorage: { reserve: function " +
  "() { return 'reserved'; }, commit: function () {}, release: function () {}, total: " +
  'function () { return 0n; } }, trustBundles: [fx.bundle], rootPublicKeyPem: fx.rootPem, ' +
  'now: function () { return fx.now; } }';
const setup =
  'CTL.setRandomSource(function (n) { return new Uint8Array(ctlHost.randomBytes(n)); ' +
  `});${BODY}; var fx = ${JSON.stringify(fixture)};`;
const engineMemory = (e) => e.memory().usedBytes;
const footprint = async (file) => {
  const empty = await createQuickJsEngine({ abi: createNodeAbi({ now: T0 }) });
  const base = engineMemory(empty);
  empty.dispose();
  const e = await createQuickJsEngine({ abi: createNodeAbi({ now: T0 }) });
  e.evalScript(readFileSync(join(root, 'dist', file), 'utf8'), file);
  const loaded = engineMemory(e) - base;
  e.evalScript(setup, 'bench.js');
  const r = e.evalSync('bench(CTL, fx, 0, 100)');
  if (r.count !== 100) throw new Error('100 verifications expected');
  const used = engineMemory(e);
  e.dispose();
  footprintLoaded[file] = loaded;
  return used - base;
};
const footprintLoaded = {};
const coldStartBest = async (file, tries = 5) => {
  const code = readFileSync(join(root, 'dist', file), 'utf8');
  let best = Infinity;
  for (let i = 0; i < tries; i++) {
    const t = performance.now();
    const e = await createQuickJsEngine({ abi: createNodeAbi({ now: T0 }) });
    e.evalScript(code, file);
    e.evalScript(setup, 'bench.js');
    e.evalSync(
      `CTL.verifyCtl(fx.sba, ${OPTS}).then(function (r) { if (!r.valid) throw new Error(r.error.code); return true; })`,
    );
    best = Math.min(best, performance.now() - t);
    e.dispose();
  }
  return best;
};
// A bare noble Ed25519 verify of the same SBA bytes, bundled for QuickJS here (the baseline).
const { build } = await import('esbuild');
const nobleIife = (
  await build({
    stdin: {
      contents:
        "import * as ed from '@noble/ed25519'; import { sha512 } from '@noble/hashes/sha2.js'; " +
        'ed.hashes.sha512 = sha512; globalThis.NOBLE = { verify: (s, m, p) => ed.verify(s, ' +
        'm, p, { zip215: false }) };',
      resolveDir: root,
    },
    bundle: true,
    format: 'iife',
    platform: 'neutral',
    mainFields: ['module', 'main'],
    write: false,
    minify: true,
    logLevel: 'error',
  })
).outputFiles[0].text;
const sbaMsg = Array.from(CTL.signedBytes('sba', sba));
const sbaSig = Array.from(CTL.base64urlDecode(sba.signature));
const actorPub = Array.from(CTL.base64urlDecode(wallet.publicJwk.x));
const qjsRate = async (prepare, loop) => {
  const e = await createQuickJsEngine({ abi: createNodeAbi({ now: T0 }) });
  try {
    prepare(e);
    const r = e.evalSync(loop);
    return (r.count * 1000) / r.ms;
  } finally {
    e.dispose();
  }
};
const rates = { sdk: [], bare: [] };
for (let round = 0; round < 3; round++) {
  // interleaved, median: the same drift hits both
  rates.bare.push(
    await qjsRate(
      (e) => {
        e.evalScript(nobleIife, 'noble.js');
        e.evalScript(
          `var m = new Uint8Array(${JSON.stringify(sbaMsg)}), s = new Uint8Array(${JSON.stringify(sbaSig)}), ` +
            `p = new Uint8Array(${JSON.stringify(actorPub)});`,
          'fx.js',
        );
      },
      `(function () { if (!NOBLE.verify(s, m, p)) throw new Error('bare verify'); var n ` +
        `= 0, t = Date.now(); while (Date.now() - t < ${seconds * 500}) { NOBLE.verify(s, ` +
        'm, p); n++; } return { count: n, ms: Date.now() - t }; })()',
    ),
  );
  rates.sdk.push(
    await qjsRate(
      (e) => {
        e.evalScript(readFileSync(join(root, 'dist/ctl-verify.iife.js'), 'utf8'), 'ctl-verify.iife.js');
        e.evalScript(setup, 'bench.js');
      },
      `bench(CTL, fx, ${seconds * 500}, 0)`,
    ),
  );
}
const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const fpVerify = await footprint('ctl-verify.iife.js');
const fpFull = await footprint('ctl.iife.js');
const coldVerify = await coldStartBest('ctl-verify.iife.js');
const coldFull = await coldStartBest('ctl.iife.js');
const qRatio = med(rates.sdk) / med(rates.bare);
console.log(`\nDevice-class SDK in QuickJS (dist/ctl-verify.iife.js; dist/ctl.iife.js beside it):`);
const kib = (bytes) => (bytes / 1024).toFixed(0);
console.log(
  `  heap footprint (bundle + 100 offline verifications − empty runtime + context): ${kib(fpVerify)} KiB, ` +
    `of which the bundle evaluated alone ${kib(footprintLoaded['ctl-verify.iife.js'])} KiB ` +
    `(ctl.iife.js: ${kib(fpFull)} / ${kib(footprintLoaded['ctl.iife.js'])} KiB)`,
);
console.log(
  '  cold start, best of 5 (new runtime → bundle evaluated → first offline verification ' +
    `valid): ${coldVerify.toFixed(1)} ms (ctl.iife.js: ${coldFull.toFixed(1)} ms)`,
);
console.log(
  `  verifications/s: ${med(rates.sdk).toFixed(0)} vs bare noble verify ${med(rates.bare).toFixed(0)}/s: ` +
    `ratio ${qRatio.toFixed(2)} (medians of 3 interleaved rounds)`,
);
console.log(
  `Device-class targets: footprint ≤ 160 KiB: ${verdict(fpVerify <= 160 * 1024)} (${(fpVerify / 1024).toFixed(0)} ` +
    `KiB); cold start ≤ 25 ms: ${verdict(coldVerify <= 25)} (${coldVerify.toFixed(1)} ` +
    `ms); verif/s ≥ 0.9 × bare noble: ${verdict(qRatio >= 0.9)} (${qRatio.toFixed(2)})`,
);
console.log(
  `\nTargets: QuickJS ≥ 50 verif/s: ${verdict(qps >= 50)} (${qps.toFixed(0)}); cold ` +
    `start ≤ 250 ms: ${verdict(coldMs <= 250)} (${coldMs.toFixed(0)} ms); iife ≤ 16 KiB ` +
    `gzip: ${verdict(gz <= 16 * 1024)} (${(gz / 1024).toFixed(1)} KiB)`,
);
rmSync(tmp, { recursive: true, force: true });
