// The wallet's bounds on the embedded build a vehicle runs (dist/ctl-wallet.iife.js in QuickJS,
// no host object but the firmware ABI): the grant's total across sessions on one storage
// (PROTOCOL.md §12), revocation from installed bundles with no network, and the coded currency
// refusal. Runs against dist/: `npm run build` first (scripts/test.mjs builds a stale dist/).
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createQuickJsEngine, type QuickJsEngine } from '../../firmware-bridge/node/quickjs.js';
import { createNodeAbi } from '../../firmware-bridge/node/test-abi.js';
import { keys, grant, bundle, T0, type Keys } from '../helpers/fixtures.js';
import { repoRoot } from '../helpers/vectors.js';

let k: Keys;
let qjs: QuickJsEngine;
test.before(async () => {
  k = await keys();
  qjs = await createQuickJsEngine({ abi: createNodeAbi({ now: T0 }) });
  qjs.evalScript(readFileSync(join(repoRoot, 'dist', 'ctl-wallet.iife.js'), 'utf8'), 'ctl-wallet.iife.js');
  // As the device entry does: the engine's only randomness is the host's.
  qjs.evalScript('CTL.setRandomSource((n) => new Uint8Array(ctlHost.randomBytes(n)));', 'random.js');
});
test.after(() => qjs.dispose());

const set = (name: string, value: unknown) =>
  qjs.evalScript(`globalThis.${name} = ${JSON.stringify(value)};`, `${name}.js`);

/** Three sessions ("process starts") on one storage, each trying to sign `amount`: what each did. */
const threeStarts = (amount: string) =>
  qjs.evalSync(`(async () => {
  const storage = CTL.createMemorySpendStorage();
  const out = [];
  for (let i = 0; i < 3; i++) {
    const s = CTL.createSession(G, { actorId: 'vehicle-42', signingKey: KEY, spendStorage: storage, now: () => ${T0},
      revocationFromBundles: { trustBundles: BUNDLES, rootPublicKeyPem: ROOT } });
    try {
      const sba = await s.createSba({ amount: '${amount}', currency: 'USD', rail: 'card' });
      out.push(sba.authorization.maxAmountMinor);
    }
    catch (e) { out.push(e.code); }
  }
  return out;
})()`);

test('QuickJS wallet IIFE: offline from a bundle, three sessions of a 5,000 grant sign 5,000 in all', async () => {
  const g = await grant(k);
  set('G', g);
  set('KEY', k.actor.privateKeyPem);
  set('ROOT', k.root.publicKeyPem);
  set('BUNDLES', [await bundle(k)]);
  assert.equal(threeStarts('5000'), ['5000', 'budget_exceeded', 'budget_exceeded']);
});

test('QuickJS wallet IIFE: bundle revoking the grant → grant_revoked; no bundle → revocation_unavailable', async () => {
  const g = await grant(k);
  set('G', g);
  set('BUNDLES', [await bundle(k, { revokedGrants: [g.grantId] })]);
  assert.equal(threeStarts('10'), ['grant_revoked', 'grant_revoked', 'grant_revoked']);
  set('G', await grant(k));
  set('BUNDLES', []);
  assert.equal(threeStarts('10'), ['revocation_unavailable', 'revocation_unavailable', 'revocation_unavailable']);
});

test('QuickJS wallet IIFE: a ceiling in another currency is currency_mismatch', () => {
  const code = qjs.evalSync(
    `(() => { try { CTL.createSession(G, { actorId: 'a', signingKey: KEY, ceiling: { amount: ` +
      `'1', currency: 'EUR' } }); return 'created'; } catch (e) { return e.code || String(e); } })()`,
  );
  assert.is(code, 'currency_mismatch');
});

test.run();
