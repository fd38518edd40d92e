// Every case of Wycheproof ed25519_test.json on every backend: a strict verifier (PROTOCOL.md §3)
// accepts exactly the `valid` cases and refuses every `invalid` one.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { hex, readJson, sourcesCount, verifiers } from './helpers.js';

const FILE = 'wycheproof/ed25519_test.json';
const data = readJson(FILE);

for (const [name, crypto] of verifiers) {
  test(`${FILE}: every case on ${name}`, async () => {
    let read = 0;
    let accepted = 0;
    const wrong: string[] = [];
    for (const group of data.testGroups) {
      // The raw key and the JWK name the same key.
      const key = await crypto.importVerifyingKey(hex(group.publicKey.pk), { alg: 'EdDSA' });
      assert.equal(key.publicJwk.x, group.publicKeyJwk.x);
      for (const t of group.tests) {
        read++;
        const ok = await crypto.verifyWithJwk(group.publicKeyJwk, hex(t.msg), hex(t.sig));
        assert.is(await key.verify(hex(t.msg), hex(t.sig)), ok);
        if (ok) accepted++;
        if (ok !== (t.result === 'valid')) wrong.push(`tcId ${t.tcId} (${t.result}, ${t.flags.join(',')})`);
      }
    }
    assert.equal(wrong, []);
    assert.ok(read >= sourcesCount(FILE), `read ${read}`);
    assert.is(read, data.numberOfTests);
    assert.is(accepted, 88); // the valid count of this file: the loop above is not vacuous
  });
}

test.run();
