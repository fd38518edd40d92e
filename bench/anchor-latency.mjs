#!/usr/bin/env node
// Issuance latency with anchoring on ÷ off (spec §4.3: anchoring "does not affect issuance
// latency"): three authorities on their own SQLite files issue grants (POST /grants over HTTP,
// one at a time, each a signature, an insert and an audit entry): `off` without anchoring, `on`
// anchoring its log's checkpoint on anvil (and on litecoind in regtest when installed) every second,
// and `down` configured for anvil at a port nothing listens on (every pass fails and retries,
// backoff capped at one second). The three take turns grant by grant (the order rotating), so a
// burst of load from elsewhere on the machine falls on all alike; each figure is the median and
// the 10 %-trimmed mean of its latencies. The ratio printed is off ÷ on (and off ÷ down): 1.00
// means no cost, ≥ 0.95 is the target.
//
//   npm run compile && node bench/anchor-latency.mjs [--grants 1500]
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const grants = arg('grants', 1500);

const build = new URL('../build/', import.meta.url);
const load = (p) => import(new URL(p, build).href);
const { startAnvil, deployContract } = await load('test/helpers/anvil.js');
const { litecoindPath, startLitecoind } = await load('test/helpers/litecoind.js');
const { freePort } = await load('test/helpers/ports.js');
const { readAuthorityConfig } = await load('authority/config.js');
const { createAuthority } = await load('authority/server.js');
const { listen, silentLogger } = await load('service-kit/index.js');
const { generateKeyPair } = await load('src/index.js');

const dir = mkdtempSync(join(tmpdir(), 'ctl-bench-anchor-'));
const anvil = await startAnvil();
const ltc = litecoindPath() ? await startLitecoind() : undefined;
const ADMIN = 'bench-admin-key-0123456789';

async function authority(name, anchorEnv) {
  const port = await freePort();
  const config = readAuthorityConfig({
    PORT: String(port),
    DATABASE_URL: `sqlite:${join(dir, `${name}.db`)}`,
    CTL_ISSUER_DOMAIN: `${name}.bench`,
    CTL_REVOCATION_BASE_URL: `http://127.0.0.1:${port}`,
    CTL_ADMIN_API_KEY: ADMIN,
    LOG_LEVEL: 'silent',
    ...anchorEnv,
  });
  const a = await createAuthority(config, {
    logger: silentLogger(),
    env: {},
    // The most anchoring work a real deployment would do, and more: a head read every second.
    anchorTiming: { anchorIntervalMs: 1000, pollMs: 500, baseDelayMs: 200, maxDelayMs: 1000 },
  });
  const server = await listen(a.app, { port, host: '127.0.0.1' });
  const call = async (path, body) => {
    const res = await fetch(`http://127.0.0.1:${port}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (res.status !== 201) throw new Error(`${name} ${path}: ${res.status} ${await res.text()}`);
    return res.json();
  };
  const { policyHash } = await call('/policies', { policy: { bench: name } });
  const actor = (await generateKeyPair()).publicJwk;
  return {
    name,
    a,
    async issue() {
      const t0 = process.hrtime.bigint();
      await call('/grants', {
        policyHash,
        actorKey: actor,
        allowedRails: ['x402'],
        allowedAssets: [{ standard: 'iso4217', code: 'USD' }],
        maxAmountMinor: '5000',
        currency: 'USD',
        expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
      });
      return Number(process.hrtime.bigint() - t0) / 1e6;
    },
    async close() {
      await server.close();
      await a.close();
    },
  };
}

const key = anvil.accounts[1];
writeFileSync(join(dir, 'anchor.key'), key.privateKey, { mode: 0o600 });
const contract = await deployContract(anvil, 'CtlAnchor', [key.address]);
const evm = (url) => ({
  CTL_ANCHOR_EVM_RPC_URL: url,
  CTL_ANCHOR_EVM_CHAIN_ID: String(anvil.chainId),
  CTL_ANCHOR_EVM_CONTRACT: contract,
  CTL_ANCHOR_EVM_KEY_FILE: join(dir, 'anchor.key'),
  CTL_ANCHOR_EVM_CONFIRMATIONS: '1',
});
const btc = ltc
  ? {
      CTL_ANCHOR_BTC_RPC_URL: ltc.url,
      CTL_ANCHOR_BTC_RPC_USER: ltc.user,
      CTL_ANCHOR_BTC_RPC_PASSWORD: ltc.password,
      CTL_ANCHOR_BTC_WALLET: ltc.wallet,
      CTL_ANCHOR_BTC_ADDRESS: ltc.address,
      CTL_ANCHOR_BTC_CONFIRMATIONS: '1',
      CTL_ANCHOR_BTC_FEE_RATE: '2',
    }
  : {};
const services = [
  await authority('off', {}),
  await authority('on', { ...evm(anvil.url), ...btc }),
  await authority('down', evm(`http://127.0.0.1:${await freePort()}`)),
];
// The `on` authority mines nothing itself: blocks come from anvil's automine and a miner here.
const miner = ltc ? setInterval(() => ltc.mine(1).catch(() => {}), 2000) : undefined;

const latencies = Object.fromEntries(services.map((s) => [s.name, []]));
for (const s of services) for (let i = 0; i < 10; i++) await s.issue(); // warm up
for (let i = 0; i < grants; i++)
  for (let k = 0; k < services.length; k++) {
    const s = services[(i + k) % services.length];
    latencies[s.name].push(await s.issue());
  }
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const trimmed = (xs) => {
  const sorted = [...xs].sort((a, b) => a - b);
  const cut = Math.floor(sorted.length / 10);
  const kept = sorted.slice(cut, sorted.length - cut);
  return kept.reduce((a, b) => a + b, 0) / kept.length;
};
const m = Object.fromEntries(Object.entries(latencies).map(([k, v]) => [k, { median: median(v), mean: trimmed(v) }]));
const anchored = await services[1].a.chain.list({ status: 'confirmed', kind: 'anchor' });
const downJobs = await services[2].a.chain.list({ kind: 'anchor' });
const fmt = (x) => `${x.median.toFixed(2)} / ${x.mean.toFixed(2)}`;
console.log(
  `issuance latency over ${grants} grants each, ms per grant (median / trimmed mean): ` +
    `off ${fmt(m.off)}, on ${fmt(m.on)}, node down ${fmt(m.down)}`,
);
console.log(
  `anchoring on: ${ltc ? 'anvil and litecoind' : 'anvil (litecoind not installed)'}; ` +
    `${anchored.length} anchors confirmed during the run; node down: ${downJobs.length} anchor rows, ` +
    `${downJobs.reduce((n, j) => n + j.attempts, 0)} failed attempts recorded`,
);
const ratio = (a, b) => `${(a.median / b.median).toFixed(3)} (means ${(a.mean / b.mean).toFixed(3)})`;
console.log(`ratio off ÷ on: ${ratio(m.off, m.on)}   ratio off ÷ down: ${ratio(m.off, m.down)}   (target ≥ 0.95)`);

clearInterval(miner);
for (const s of services) await s.close();
await anvil.stop();
await ltc?.stop();
rmSync(dir, { recursive: true, force: true });
