// The opt-in verifier modules (src/verifier/features.ts): a verifier built without the Human-Agent
// profile or online checks refuses every case that needs one with `unsupported_feature` (PROTOCOL.md
// §16), the message naming the module, never a pass and never a throw; once the module is registered, our own vectors
// give exactly their verdicts; a module from another bundle (its own CtlError class) keeps its codes.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { chainOptions, readOwnVectors } from '../helpers/own-vectors.js';
import { createCtlCrypto } from '../../src/crypto/index.js';
import { createVerifier } from '../../src/verifier/verify.js';
import { registerHumanAgent, registerOnlineChecks } from '../../src/verifier/features.js';
import { humanAgentProfile } from '../../src/entries/human-agent.js';
import { onlineChecks } from '../../src/entries/online.js';

delete process.env['CTL_SBA_SIGNING_PUBLIC_KEY_PEM'];
const human = readOwnVectors('human-agent.json');
const grants = readOwnVectors('grant.json');
const c = createCtlCrypto('native');

// Human-Agent chain cases, and the online cases of both files (revocation answered by a fake).
const cases = [
  ...human.cases
    .filter((k: any) => k.kind === 'chain')
    .map((k: any) => ({ k, keys: human.keys, needs: k.options.offline === false ? 'both' : 'human' })),
  ...grants.cases
    .filter((k: any) => k.kind === 'chain' && k.options.offline === false)
    .map((k: any) => ({ k, keys: grants.keys, needs: 'online' })),
];

async function verdicts(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const { k, keys } of cases) {
    const verify = createVerifier(c);
    for (const p of k.input.prior ?? [])
      await verify(p.sba, { ...chainOptions(k, keys), amount: p.amount ?? k.options.amount });
    const r = await verify(k.input.sba, chainOptions(k, keys));
    out[k.id] = r.valid ? 'valid' : r.error.code;
  }
  return out;
}
const expected = (k: any) => (k.expected.valid ? 'valid' : k.expected.code);

/**
 * The refusal of a verifier lacking `human` and/or `online`: the Human-Agent profile is asked for first (key resolution
 * precedes revocation).
 */
const lacking = (needs: string, human: boolean, online: boolean) =>
  (needs !== 'online' && !human) || (needs !== 'human' && !online) ? 'unsupported_feature' : undefined;

for (const [human, online] of [
  [false, false],
  [true, false],
  [false, true],
] as const) {
  test(
    `human-agent ${human ? 'registered' : 'absent'}, online ${online ? 'registered' : 'absent'}: ` +
      'what needs an absent module is refused, the rest keeps its verdict',
    async () => {
      registerHumanAgent(human ? humanAgentProfile : undefined);
      registerOnlineChecks(online ? onlineChecks : undefined);
      const got = await verdicts();
      let refused = 0;
      for (const { k, needs } of cases) {
        const code = lacking(needs, human, online);
        if (code) assert.is.not(got[k.id], 'valid', `${k.id} passed without the module it needs`);
        if (code && got[k.id] === code) refused++;
        // A grant malformed as a grant is refused as such before any module is asked for.
        else assert.is(got[k.id], expected(k), k.id);
        if (code && k.expected.valid) assert.is(got[k.id], code, k.id);
      }
      if (!human && !online) assert.ok(refused >= 30, `only ${refused} cases needed a module`);
    },
  );
}

test('registered: every case gives exactly its committed verdict', async () => {
  registerHumanAgent(humanAgentProfile);
  registerOnlineChecks(onlineChecks);
  const got = await verdicts();
  for (const { k } of cases) assert.is(got[k.id], expected(k), k.id);
});

test('a module from another bundle keeps its codes; a malformed module is a TypeError at registration', async () => {
  // Another bundle's CtlError: not our class, but a code from the same list.
  class ForeignError extends Error {
    constructor(
      readonly code: string,
      m: string,
    ) {
      super(m);
    }
  }
  registerHumanAgent({
    didKeyToJwk: () => {
      throw new ForeignError('unsupported_algorithm', 'P-384');
    },
  });
  const valid = cases.find(({ k, needs }: any) => needs === 'human' && k.expected.valid);
  const r = await createVerifier(c)(valid.k.input.sba, chainOptions(valid.k, valid.keys));
  assert.is(!r.valid && r.error.code, 'unsupported_algorithm');
  assert.throws(() => registerHumanAgent({} as never), TypeError);
  assert.throws(() => registerOnlineChecks({ fetchJson: () => 1 } as never), TypeError);
  registerHumanAgent(undefined);
});

test('a verifier built with its modules needs no registration (as ctl builds its verifyCtl)', async () => {
  registerHumanAgent(undefined);
  registerOnlineChecks(undefined);
  const valid = cases.find(({ k, needs }: any) => needs === 'both' && k.expected.valid);
  const bare = await createVerifier(c)(valid.k.input.sba, chainOptions(valid.k, valid.keys));
  assert.is(!bare.valid && bare.error.code, 'unsupported_feature');
  assert.match(!bare.valid ? bare.error.message : '', /register ctl\/human-agent/);
  const r = await createVerifier(c, { humanAgent: humanAgentProfile, online: onlineChecks })(
    valid.k.input.sba,
    chainOptions(valid.k, valid.keys),
  );
  assert.ok(r.valid, JSON.stringify(r));
});

test.run();
