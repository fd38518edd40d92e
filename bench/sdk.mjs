#!/usr/bin/env node
// SDK speed and size, as ratios against baselines measured in the same run (machines here are
// noisy, so absolute numbers mean little). Run: npm run build && node bench/sdk.mjs
//
//   verifyCtl (grant cached) ÷ one bare node:crypto Ed25519 verify   (native backend)
//   verifyCtl (grant cached) ÷ one bare noble Ed25519 verify          (noble backend)
//   createSba ÷ one bare sign, on each backend
//   min+gzip size of each dist file
import { createRequire } from 'node:module';
import { readFileSync, existsSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import crypto from 'node:crypto';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
if (!existsSync(root + 'dist/index.js')) {
  console.error('dist/ is missing: run `npm run build` first');
  process.exit(1);
}
const CTL = await import(root + 'dist/index.js');
const require = createRequire(import.meta.url);
const ed = await import('@noble/ed25519');
const { sha512 } = await import('@noble/hashes/sha2.js');
ed.hashes.sha512 = sha512;

const DURATION_MS = Number(process.env.BENCH_MS ?? 700);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);

/** ops/s of `fn` (sync or async), the median of ROUNDS interleaved rounds is taken by `compare`. */
async function opsPerSec(fn) {
  let n = 0;
  const start = performance.now();
  let now = start;
  while (now - start < DURATION_MS) {
    for (let i = 0; i < 20; i++) await fn();
    n += 20;
    now = performance.now();
  }
  return (n * 1000) / (now - start);
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Interleaves baseline and subject rounds so drift hits both; returns medians and ratio. */
async function compare(label, baseline, subject) {
  const b = [], s = [];
  for (let r = 0; r < ROUNDS; r++) {
    b.push(await opsPerSec(baseline));
    s.push(await opsPerSec(subject));
  }
  const row = { label, baseline: Math.round(median(b)), subject: Math.round(median(s)), ratio: median(s) / median(b) };
  console.log(`${label.padEnd(52)} ${String(row.subject).padStart(7)}/s vs ${String(row.baseline).padStart(7)}/s  ratio ${row.ratio.toFixed(2)}`);
  return row;
}

// Fixture: authority, actor, a grant and one SBA.
const authority = await CTL.generateKeyPair({ alg: 'EdDSA' });
const actor = await CTL.generateKeyPair({ alg: 'EdDSA' });
const now = Date.now();
const grant = await CTL.createSignedPolicyGrant({
  policyHash: CTL.policyHash({ budget: { amount: '1000000000', currency: 'USD' } }),
  actorKey: actor.publicJwk, allowedRails: ['x402'], allowedAssets: [{ standard: 'iso4217', code: 'USD' }],
  allowedPurposes: ['api:*'], maxAmountMinor: '1000000000', currency: 'USD', destinationAllowlist: ['merchant-a'],
  expiresAt: CTL.formatTimestamp(now + 86400000),
}, { issuer: 'authority.bench', signingKey: authority.privateKeyPem, revocationBaseUrl: 'https://authority.bench' });
const okFetch = async (url) => ({ ok: true, status: 200, text: async () => JSON.stringify({ grantId: grant.grantId, revoked: false }) });
const session = CTL.createSession(grant, { actorId: 'bench', signingKey: actor.privateKeyPem, fetch: okFetch });
const sba = await session.createSba({ amount: '1', currency: 'USD', rail: 'x402', merchantId: 'merchant-a', purpose: 'api:x' });
const verifyOpts = { amount: '1', currency: 'USD', merchantId: 'merchant-a', offline: true, signingKeyPem: authority.publicKeyPem };

// Baselines: one bare signature over bytes of the same size as the SBA's signed message.
const msg = CTL.signedBytes('sba', sba);
const sig = CTL.base64urlDecode(sba.signature);
const pub = crypto.createPublicKey(actor.publicKeyPem);
const priv = crypto.createPrivateKey(actor.privateKeyPem);
if (!crypto.verify(null, msg, pub, sig)) throw new Error('bench fixture: bare verify failed');
const rawPub = CTL.base64urlDecode(actor.publicJwk.x);
const rawSeed = new Uint8Array(priv.export({ format: 'der', type: 'pkcs8' }).subarray(-32));
const check = async (r) => { if (!r.valid) throw new Error('bench: verifyCtl refused: ' + JSON.stringify(r.error)); };

console.log(`CTL SDK bench (node ${process.version}, ${DURATION_MS} ms × ${ROUNDS} interleaved rounds, medians)\n`);
const rows = [];
CTL.setCryptoBackend('native');
await check(await CTL.verifyCtl(sba, verifyOpts));
rows.push(await compare('native: verifyCtl ÷ bare node:crypto verify', () => crypto.verify(null, msg, pub, sig), async () => check(await CTL.verifyCtl(sba, verifyOpts))));
let i = 0;
const pay = () => session.createSba({ amount: '1', currency: 'USD', rail: 'x402', merchantId: 'merchant-a', purpose: 'api:x' });
rows.push(await compare('native: createSba ÷ bare node:crypto sign', () => crypto.sign(null, msg, priv), pay));

CTL.setCryptoBackend('noble');
await check(await CTL.verifyCtl(sba, verifyOpts));
rows.push(await compare('noble:  verifyCtl ÷ bare noble verify', () => ed.verify(sig, msg, rawPub, { zip215: false }), async () => check(await CTL.verifyCtl(sba, verifyOpts))));
const nobleSession = CTL.createSession(grant, { actorId: 'bench', signingKey: actor.privateKeyPem, fetch: okFetch });
rows.push(await compare('noble:  createSba ÷ bare noble sign', () => ed.sign(msg, rawSeed), () => nobleSession.createSba({ amount: '1', currency: 'USD', rail: 'x402', merchantId: 'merchant-a', purpose: 'api:x' })));

console.log('\nBundle sizes (already minified by the build; gzip -9):');
const sizes = {};
for (const f of ['dist/index.js', 'dist/index.cjs', 'dist/ctl.iife.js', 'dist/edge.js']) {
  const buf = readFileSync(root + f);
  sizes[f] = { min: buf.length, gzip: gzipSync(buf, { level: 9 }).length };
  console.log(`  ${f.padEnd(18)} ${(sizes[f].min / 1024).toFixed(1).padStart(6)} KB min  ${(sizes[f].gzip / 1024).toFixed(1).padStart(5)} KB gzip`);
}
console.log('\nTargets: native verify ratio ≥ 0.6; noble ≥ 0.8; dist/index.js ≤ 14 KB gzip; dist/edge.js ≤ 5 KB gzip; dist/ctl.iife.js ≤ 16 KB gzip');
if (process.env.BENCH_JSON) console.log(JSON.stringify({ rows, sizes }));
