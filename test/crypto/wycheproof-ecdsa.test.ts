// Every case of Wycheproof ECDSA P-256/SHA-256, raw r‖s (P1363) and DER, on every backend.
// A strict verifier (PROTOCOL.md §3) accepts exactly the `valid` cases (high S included).
// DER signatures become raw r‖s only when the DER is well-formed and each integer fits in 32
// bytes; the others cannot be expressed as a CTL signature at all, so they are counted as
// refused by construction, never claimed as verified.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { facades, hex, readJson, sourcesCount } from './helpers.js';

const P1363 = 'wycheproof/ecdsa_secp256r1_sha256_p1363_test.json';
const DER = 'wycheproof/ecdsa_secp256r1_sha256_test.json';
const p1363 = readJson(P1363);
const der = readJson(DER);

/** Strict DER ECDSA-Sig-Value to raw r‖s, or undefined when not well-formed DER or not expressible. */
function derToRaw(sig: Uint8Array): Uint8Array | undefined {
  if (sig.length < 2 || sig[0] !== 0x30 || sig[1]! >= 0x80 || sig[1] !== sig.length - 2) return undefined;
  const out = new Uint8Array(64);
  let at = 2;
  for (let k = 0; k < 2; k++) {
    if (sig[at] !== 0x02) return undefined;
    const len = sig[at + 1];
    if (len === undefined || len === 0 || len >= 0x80 || at + 2 + len > sig.length) return undefined;
    let int = sig.subarray(at + 2, at + 2 + len);
    if (int[0]! & 0x80) return undefined; // negative
    if (int[0] === 0 && int.length > 1 && !(int[1]! & 0x80)) return undefined; // non-minimal
    if (int[0] === 0 && int.length > 1) int = int.subarray(1);
    if (int.length > 32) return undefined;
    out.set(int, 32 * k + 32 - int.length);
    at += 2 + len;
  }
  return at === sig.length ? out : undefined;
}

for (const [name, crypto] of facades) {
  test(`${P1363}: every case on ${name}`, async () => {
    let read = 0;
    let accepted = 0;
    const wrong: string[] = [];
    for (const group of p1363.testGroups) {
      const key = await crypto.importVerifyingKey(hex(group.publicKey.uncompressed), { alg: 'ES256' });
      const jwk = group.publicKeyJwk;
      if (jwk) assert.equal(key.publicJwk, { kty: 'EC', crv: 'P-256', x: jwk.x, y: jwk.y });
      for (const t of group.tests) {
        read++;
        const ok = await crypto.verifyWithJwk(jwk ?? key.publicJwk, hex(t.msg), hex(t.sig));
        if (ok) accepted++;
        if (ok !== (t.result === 'valid')) wrong.push(`tcId ${t.tcId} (${t.result}, ${t.flags.join(',')})`);
      }
    }
    assert.equal(wrong, []);
    assert.ok(read >= sourcesCount(P1363), `read ${read}`);
    assert.is(accepted, 173);
  });

  test(`${DER}: every case on ${name} (raw where expressible)`, async () => {
    let read = 0;
    let verified = 0;
    let accepted = 0;
    let unexpressible = 0;
    const wrong: string[] = [];
    for (const group of der.testGroups) {
      const key = await crypto.importVerifyingKey(hex(group.publicKey.uncompressed), { alg: 'ES256' });
      for (const t of group.tests) {
        read++;
        const raw = derToRaw(hex(t.sig));
        if (!raw) {
          unexpressible++;
          if (t.result === 'valid') wrong.push(`tcId ${t.tcId}: valid but not convertible`);
          continue;
        }
        verified++;
        const ok = await key.verify(hex(t.msg), raw);
        if (ok) accepted++;
        if (ok !== (t.result === 'valid')) wrong.push(`tcId ${t.tcId} (${t.result}, ${t.flags.join(',')})`);
      }
    }
    assert.equal(wrong, []);
    assert.ok(read >= sourcesCount(DER), `read ${read}`);
    assert.is(verified + unexpressible, read);
    assert.is(accepted, 174);
    if (name === 'native')
      console.log(
        `  ${DER}: ${read} read, ${verified} verified as raw r‖s, ${unexpressible} DER-invalid ` +
          'or not expressible (refused by construction)',
      );
  });
}

test.run();
