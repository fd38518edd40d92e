/**
 * An SBA is accepted at most once, ever (PROTOCOL.md §7), whatever windows the links of its chain
 * carry (§13, §14): the replay record is keyed by nothing that changes with time. Run on the
 * source and on each built verifier (`ctl` dist/index.js, `ctl/verify` dist/verify.js, `ctl/edge`
 * dist/edge.js), online with `trackSpend` and offline, on one storage and with a time floor.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import * as CTL from '../../src/index.js';
import { verifyCtlEdge } from '../../src/edge.js';
import { root as repoRoot } from '../../firmware-bridge/node/device-script.js';
import { windowedChain, T0, MINUTE, HOUR } from '../helpers/windowed-chain.js';

type Verify = (sba: unknown, o: CTL.VerifyCtlOptions) => Promise<CTL.VerifyCtlResult>;
const dist = async (f: string) => import(pathToFileURL(join(repoRoot, 'dist', f)).href);

async function builds(): Promise<Array<[string, Verify]>> {
  return [
    ['source ctl', CTL.verifyCtl],
    ['source ctl/edge', verifyCtlEdge],
    ['dist/index.js', (await dist('index.js')).verifyCtl],
    ['dist/verify.js', (await dist('verify.js')).verifyCtl],
    ['dist/edge.js', (await dist('edge.js')).verifyCtlEdge],
  ];
}

let fx: Awaited<ReturnType<typeof windowedChain>>;
test.before(async () => {
  fx = await windowedChain(CTL);
});

const codeOf = (r: CTL.VerifyCtlResult) => (r.valid ? 'valid' : r.error.code);

for (const timeFloor of [false, true]) {
  const floor = timeFloor ? ' (with a time floor)' : '';
  test(`an SBA under a link with an hourly window, at 10:58 and again at 11:00, is accepted once${floor}`, async () => {
    for (const [name, verify] of await builds()) {
      const storage = CTL.createMemorySpendStorage();
      const clock = { t: T0 + 58 * MINUTE };
      const o = {
        amount: '500',
        currency: 'EUR',
        offline: true,
        trustBundles: [fx.bundle],
        rootPublicKeyPem: fx.root.publicKeyPem,
        spendStorage: storage,
        now: () => clock.t,
        ...(timeFloor ? { timeFloor: CTL.createMemoryTimeFloor() } : {}),
      };
      const sba = await fx.sba('500', clock.t, 5 * MINUTE);
      assert.is(codeOf(await verify(sba, o)), 'valid', `${name}: first at 10:58`);
      clock.t = T0 + HOUR; // 11:00: another hourly window of the link
      assert.is(codeOf(await verify(sba, o)), 'replay', `${name}: the same SBA at 11:00`);
      clock.t = T0 + HOUR + 2 * MINUTE;
      assert.is(codeOf(await verify(sba, o)), 'replay', `${name}: and at 11:02`);
    }
  });
}

test('an SBA valid 20 hours, presented hourly to an offline terminal, is accepted once on every build', async () => {
  for (const [name, verify] of await builds()) {
    const storage = CTL.createMemorySpendStorage();
    const clock = { t: T0 + 10 * MINUTE };
    const sba = await fx.sba('500', clock.t, 20 * HOUR);
    const verdicts: string[] = [];
    for (let h = 0; h < 20; h++) {
      clock.t = T0 + 10 * MINUTE + h * HOUR;
      const r = await verify(sba, {
        amount: '500',
        currency: 'EUR',
        offline: true,
        trustBundles: [fx.bundle],
        rootPublicKeyPem: fx.root.publicKeyPem,
        spendStorage: storage,
        now: () => clock.t,
      });
      verdicts.push(codeOf(r));
    }
    assert.is(verdicts.filter((v) => v === 'valid').length, 1, `${name}: ${verdicts.join(',')}`);
    assert.ok(
      verdicts.slice(1).every((v) => v === 'replay'),
      `${name}: ${verdicts.join(',')}`,
    );
    assert.is(await storage.total('grant:' + fx.grant.grantId), 500n, `${name}: charged once`);
  }
});

test('online with trackSpend: the same SBA in the next hour window is a replay on every build', async () => {
  for (const [name, verify] of await builds()) {
    const storage = CTL.createMemorySpendStorage();
    const clock = { t: T0 + 30 * MINUTE };
    const sba = await fx.sba('700', clock.t, 2 * HOUR);
    const o = {
      amount: '700',
      currency: 'EUR',
      trackSpend: true,
      trustBundles: [fx.bundle],
      rootPublicKeyPem: fx.root.publicKeyPem,
      spendStorage: storage,
      fetch: async (url: string) => {
        const grantId = new URL(url).searchParams.get('grantId');
        return { ok: true, status: 200, text: async () => JSON.stringify({ grantId, revoked: false }) };
      },
      now: () => clock.t,
    };
    if (name === 'dist/verify.js') continue; // online revocation is opt-in there (offline covered above)
    assert.is(codeOf(await verify(sba, o)), 'valid', `${name}: first`);
    clock.t += HOUR;
    assert.is(codeOf(await verify(sba, o)), 'replay', `${name}: an hour later`);
  }
});

test.run();
