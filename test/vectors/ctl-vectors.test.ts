/**
 * Every case of ../shared/vectors/ctl/vectors.json, signed by an independent implementation of
 * PROTOCOL.md, gives exactly its expected `valid` and `code`, on both crypto backends.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readVectorJson } from '../helpers/vectors.js';
import { canonicalize, parseStrictJson, policyHash, parseTimestamp } from '../../src/index.js';
import { createVerifier } from '../../src/verifier/verify.js';
import { verifyBundleWith } from '../../src/artifacts/bundle.js';
import { verifyReceiptWith } from '../../src/artifacts/receipt.js';
import { createCtlCrypto } from '../../src/crypto/index.js';
import { registerP256 } from '../../src/crypto/algorithm-support.js';
import { nobleP256 } from '../../src/entries/p256.js';

// The noble backend as a QuickJS host builds it: P-256 registered from ctl/p256.
registerP256(nobleP256);

const file = readVectorJson('ctl/vectors.json');
const keys = file.keys as Record<string, { publicKeyPem: string }>;

function trustOptions(trust: string, input: any) {
  const [form, name] = trust.split(':') as [string, string];
  if (form === 'signingKeyPem') return { signingKeyPem: keys[name]!.publicKeyPem };
  if (form === 'trustBundles+root')
    return { trustBundles: input.trustBundles, rootPublicKeyPem: keys[name]!.publicKeyPem };
  throw new Error('unknown trust form ' + trust);
}

test('reads all 44 cases', () => {
  assert.ok(file.cases.length >= 44, `read ${file.cases.length}`);
});

for (const backend of ['native', 'noble'] as const) {
  const c = createCtlCrypto(backend);
  for (const k of file.cases) {
    test(`${backend}: ${k.id}`, async () => {
      const now = () => parseTimestamp(k.options.now, 'now');
      let result: { valid: boolean; error?: { code: string } };
      if (k.kind === 'chain') {
        const verify = createVerifier(c); // a fresh verifier per case, as the vectors ask
        result = await verify(k.input.sba, {
          amount: k.options.amount,
          currency: k.options.currency,
          merchantId: k.options.merchantId,
          offline: true,
          now,
          ...trustOptions(k.options.trust, k.input),
        });
      } else if (k.kind === 'bundle') {
        const root = keys[k.options.trust.split(':')[1]]!.publicKeyPem;
        result = await verifyBundleWith(c, k.input.bundle, root, { now, minSequence: k.options.minSequence });
      } else if (k.kind === 'receipt') {
        const key = keys[k.options.trust.split(':')[1]]!.publicKeyPem;
        result = await verifyReceiptWith(c, k.input.receipt, { publicKey: key });
      } else if (k.kind === 'jcs-policy-hash') {
        try {
          const doc = parseStrictJson(k.input.policyJson);
          assert.is(canonicalize(doc), k.expected.jcs);
          assert.is(policyHash(doc), k.expected.policyHash);
          if (k.input.policy) assert.is(policyHash(k.input.policy), k.expected.policyHash);
          result = { valid: true };
        } catch (e: any) {
          if (!e?.code) throw e;
          result = { valid: false, error: { code: e.code } };
        }
      } else throw new Error('unknown kind ' + k.kind);
      assert.is(result.valid, k.expected.valid, `${k.id}: ${JSON.stringify(result)}`);
      if (k.expected.code) assert.is(result.error?.code, k.expected.code, `${k.id}: ${JSON.stringify(result)}`);
    });
  }
}

test.run();
