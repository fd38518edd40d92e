// RFC 8032 test vectors, the 1024 SUPERCOP sign.input lines (sign reproduces every signature
// byte for byte, verify accepts), ZIP-215 (a strict RFC 8032 verifier refuses all of it,
// PROTOCOL.md §3) and the "Taming the many EdDSAs" edge cases, on every backend.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { facades, hex, nobleVerifyOnly, readJson, readVector, sourcesCount, toHex, verifiers } from './helpers.js';

const RFC = 'ed25519/rfc8032-ed25519.json';
const SIGN = 'ed25519/sign.input.txt';
const ZIP = 'ed25519/zip215.json';
const EDGE = 'ed25519/edge-cases.json';

const rfc = readJson<{ priv: string; pub: string; msg: string; sig: string }[]>(RFC);
const lines = readVector(SIGN)
  .split('\n')
  .filter((l) => l.length > 0);
const zip = readJson<{ vk_bytes: string; sig_bytes: string }[]>(ZIP);
const edge = readJson<{ message: string; pub_key: string; signature: string }[]>(EDGE);

// Speccheck (eprint 2020/1244) cases 0-11 under §3: small-order A or R (0, 1, 2), cofactored-only
// equations (4, 5), S ≥ L (6, 7), non-canonical R (8, 9) and A (10, 11) are refused; only case 3
// (mixed-order A and R satisfying the cofactorless equation) is a valid signature.
const EDGE_EXPECTED = [false, false, false, true, false, false, false, false, false, false, false, false];

for (const [name, crypto] of facades) {
  test(`${RFC} on ${name}: sign reproduces, verify accepts`, async () => {
    assert.ok(rfc.length >= sourcesCount(RFC));
    for (const v of rfc) {
      const key = await crypto.importSigningKey(hex(v.priv), { alg: 'EdDSA' });
      assert.is(toHex(new Uint8Array(Buffer.from(key.publicJwk.x, 'base64url'))), v.pub);
      assert.is(toHex(await key.sign(hex(v.msg))), v.sig);
      assert.ok(await crypto.verifyWithJwk(key.publicJwk, hex(v.msg), hex(v.sig)));
    }
  });

  test(`${SIGN} on ${name}: all lines`, async () => {
    assert.ok(lines.length >= sourcesCount(SIGN), `read ${lines.length}`);
    for (const line of lines) {
      const [skpk, pk, msg, sigmsg] = line.split(':') as [string, string, string, string];
      const key = await crypto.importSigningKey(hex(skpk.slice(0, 64)), { alg: 'EdDSA' });
      assert.is(toHex(new Uint8Array(Buffer.from(key.publicJwk.x, 'base64url'))), pk);
      const sig = await key.sign(hex(msg));
      assert.is(toHex(sig), sigmsg.slice(0, 128));
      assert.ok(await crypto.verifyWithJwk(key.publicJwk, hex(msg), sig));
    }
  });
}

// ctl/verify's own verify (no signing there): the same signatures accepted, published keys.
test(`${RFC} and ${SIGN} on noble-verify (ctl/verify): every signature accepted, any flipped bit refused`, async () => {
  const cases = [
    ...rfc.map((v: any) => [v.pub, v.msg, v.sig]),
    ...lines.map((l) => l.split(':')).map(([, pk, msg, sigmsg]) => [pk, msg, sigmsg!.slice(0, 128)]),
  ];
  assert.ok(cases.length >= sourcesCount(RFC) + sourcesCount(SIGN));
  for (const [i, [pk, msg, sig]] of cases.entries()) {
    const jwk = { kty: 'OKP' as const, crv: 'Ed25519' as const, x: Buffer.from(pk!, 'hex').toString('base64url') };
    assert.ok(await nobleVerifyOnly.verifyWithJwk(jwk, hex(msg!), hex(sig!)), `case ${i}`);
    const bad = hex(sig!);
    bad[i % 64]! ^= 1 << (i % 8);
    assert.not.ok(await nobleVerifyOnly.verifyWithJwk(jwk, hex(msg!), bad), `case ${i}, bit flipped`);
  }
});

for (const [name, crypto] of verifiers) {
  test(`${ZIP} on ${name}: every case refused`, async () => {
    assert.ok(zip.length >= sourcesCount(ZIP), `read ${zip.length}`);
    const message = new TextEncoder().encode('Zcash');
    const accepted: number[] = [];
    for (const [i, v] of zip.entries()) {
      const jwk = {
        kty: 'OKP' as const,
        crv: 'Ed25519' as const,
        x: Buffer.from(v.vk_bytes, 'hex').toString('base64url'),
      };
      if (await crypto.verifyWithJwk(jwk, message, hex(v.sig_bytes))) accepted.push(i);
    }
    assert.equal(accepted, []);
  });

  test(`${EDGE} on ${name}: exactly the strict results`, async () => {
    assert.ok(edge.length >= sourcesCount(EDGE), `read ${edge.length}`);
    const got: boolean[] = [];
    for (const v of edge) {
      const jwk = {
        kty: 'OKP' as const,
        crv: 'Ed25519' as const,
        x: Buffer.from(v.pub_key, 'hex').toString('base64url'),
      };
      got.push(await crypto.verifyWithJwk(jwk, hex(v.message), hex(v.signature)));
    }
    assert.equal(got, EDGE_EXPECTED);
  });
}

test.run();
