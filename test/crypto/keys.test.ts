// Key import in every form (PEM, JWK, raw, CryptoKey, imported keys), round trips, refusals
// (CtlError malformed), and RFC 7638 thumbprints, on every facade.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as nodeCrypto from 'node:crypto';
import { CtlError } from '../../src/errors.js';
import { base64urlEncode } from '../../src/encoding/base64url.js';
import { utf8Encode } from '../../src/encoding/utf8.js';
import {
  generateKeyPair,
  jwkThumbprint,
  jwkThumbprintSync,
  publicKeyPemFromJwk,
  sha256Sync,
} from '../../src/crypto/index.js';
import { thumbprintInput } from '../../src/crypto/jwk.js';
import type { CtlCrypto, PublicJwk } from '../../src/crypto/types.js';
import { facades, hex, readJson, toHex } from './helpers.js';

const ctl = readJson('ctl/vectors.json');
const keys = Object.entries(ctl.keys) as [string, any][];
const msg = utf8Encode('ctl-sba/1\n{"a":1}');
const P = 2n ** 255n - 19n;

const b64u = (b: Uint8Array) => base64urlEncode(b);
const okp = (x: Uint8Array): PublicJwk => ({ kty: 'OKP', crv: 'Ed25519', x: b64u(x) });
/** Little-endian 32-byte encoding of y with the sign bit. */
function edEncoding(y: bigint, sign = 0): Uint8Array {
  const out = new Uint8Array(32);
  for (let i = 0; i < 32; i++, y >>= 8n) out[i] = Number(y & 0xffn);
  out[31]! |= sign << 7;
  return out;
}

async function malformed(p: Promise<unknown>, what: string): Promise<void> {
  try {
    await p;
  } catch (e) {
    assert.instance(e, CtlError, what);
    assert.is((e as CtlError).code, 'malformed', what);
    return;
  }
  assert.unreachable(`accepted: ${what}`);
}

/** A DER TLV (short or one-byte long form), to build the less common PKCS#8 shapes. */
function der(tag: number, ...parts: Uint8Array[]): Uint8Array {
  const body = Buffer.concat(parts);
  const len = body.length < 128 ? [body.length] : [0x81, body.length];
  return new Uint8Array(Buffer.concat([Buffer.from([tag, ...len]), body]));
}

const pemOf = (label: string, bytes: Uint8Array) =>
  `-----BEGIN ${label}-----\n${Buffer.from(bytes).toString('base64').replace(/.{64}/g, '$&\n')}\n-----END ` +
  `${label}-----\n`;

test('RFC 7638 §3.1: the RSA example thumbprint (canonical JSON + SHA-256 + base64url)', () => {
  const members = {
    kty: 'RSA',
    n:
      '0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n' +
      '3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zg' +
      'dAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFC' +
      'ur-kEgU8awapJzKnqDKgw',
    e: 'AQAB',
  };
  assert.ok(thumbprintInput(members).startsWith('{"e":"AQAB","kty":"RSA","n":"0vx7'));
  assert.is(b64u(sha256Sync(utf8Encode(thumbprintInput(members)))), 'NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs');
});

test('RFC 8037 A.3: the Ed25519 thumbprint, on every facade; optional members do not change it', async () => {
  const jwk = { kty: 'OKP', crv: 'Ed25519', x: '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo' } as const;
  const want = 'kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k';
  assert.is(jwkThumbprintSync(jwk), want);
  assert.is(await jwkThumbprint({ ...jwk, kid: 'x', alg: 'EdDSA' } as PublicJwk), want);
  for (const [, c] of facades) assert.is(await c.jwkThumbprint(jwk), want);
  await malformed(jwkThumbprint({ ...jwk, x: jwk.x + 'A' }), 'x of 33 bytes');
  await malformed(jwkThumbprint({ ...jwk, kty: 'EC' } as unknown as PublicJwk), 'kty/crv mismatch');
});

for (const [name, c] of facades) {
  test(`ctl vectors keys on ${name}: PEM and raw import, PEM output, kid = thumbprint`, async () => {
    assert.ok(keys.length >= 6);
    for (const [label, k] of keys) {
      const signing = await c.importSigningKey(k.privateKeyPem);
      assert.equal({ ...signing.publicJwk }, k.publicJwk, label);
      assert.is(signing.alg, k.alg);
      assert.equal(await c.toPublicJwk(k.publicKeyPem), k.publicJwk, label);
      assert.equal(await c.toPublicJwk(k.privateKeyPem), k.publicJwk, label);
      assert.is(publicKeyPemFromJwk(k.publicJwk), k.publicKeyPem, label);
      assert.is(await c.jwkThumbprint(k.publicJwk), k.kid, label);
      const verifying = await c.importVerifyingKey(k.publicKeyPem);
      assert.ok(await verifying.verify(msg, await signing.sign(msg)), label);
      if (k.seedHex) {
        // README: PKCS#8 = fixed prefix ‖ seed, so the raw seed is the same key.
        assert.ok(
          k.privateKeyPem.includes(
            Buffer.from('302e020100300506032b657004220420' + k.seedHex, 'hex').toString('base64'),
          ),
        );
        const raw = await c.importSigningKey(hex(k.seedHex));
        assert.equal({ ...raw.publicJwk }, k.publicJwk);
        assert.is(toHex(await raw.sign(msg)), toHex(await signing.sign(msg)), 'Ed25519 is deterministic');
      }
    }
  });

  test(`generateKeyPair PEMs interoperate with node:crypto (${name} verifies, OpenSSL verifies)`, async () => {
    for (const alg of ['EdDSA', 'ES256'] as const) {
      const kp = await generateKeyPair({ alg });
      const priv = nodeCrypto.createPrivateKey(kp.privateKeyPem);
      const pub = nodeCrypto.createPublicKey(kp.publicKeyPem);
      assert.equal(pub.export({ format: 'jwk' }), kp.publicJwk);
      assert.equal(nodeCrypto.createPublicKey(priv).export({ format: 'jwk' }), kp.publicJwk);
      const opts = alg === 'ES256' ? { dsaEncoding: 'ieee-p1363' as const } : {};
      const h = alg === 'ES256' ? 'sha256' : null;
      const ours = await (await c.importSigningKey(kp.privateKeyPem)).sign(msg);
      assert.ok(nodeCrypto.verify(h, msg, { key: pub, ...opts }, ours));
      const theirs = nodeCrypto.sign(h, msg, { key: priv, ...opts });
      assert.ok(await c.verifyWithJwk(kp.publicJwk, msg, new Uint8Array(theirs)));
    }
  });

  test(`private JWKs (d) on ${name}: import, and a mismatched public half is refused`, async () => {
    for (const type of ['ed25519', 'ec'] as const) {
      const { privateKey } =
        type === 'ec'
          ? nodeCrypto.generateKeyPairSync('ec', { namedCurve: 'P-256' })
          : nodeCrypto.generateKeyPairSync('ed25519');
      const jwk = privateKey.export({ format: 'jwk' }) as JsonWebKey;
      const k = await c.importSigningKey(jwk);
      assert.is(k.publicJwk.x, jwk.x);
      assert.ok(await c.verifyWithJwk(k.publicJwk, msg, await k.sign(msg)));
      const { d: _d, ...pub } = jwk;
      assert.equal(await c.toPublicJwk(jwk), pub);
      const other = (
        type === 'ec'
          ? nodeCrypto.generateKeyPairSync('ec', { namedCurve: 'P-256' })
          : nodeCrypto.generateKeyPairSync('ed25519')
      ).publicKey.export({ format: 'jwk' });
      await malformed(c.importSigningKey({ ...jwk, x: other.x, y: other.y }), `${type}: d with another key's x`);
      await malformed(c.importSigningKey({ ...jwk, d: jwk.d + 'AA' }), `${type}: d of 34 bytes`);
      await malformed(c.importSigningKey(pub), `${type}: no d`);
      // Without x/y the public half is derived (not on edge, where WebCrypto parses private JWKs and needs them).
      const dOnly = c.importSigningKey({ kty: jwk.kty, crv: jwk.crv, d: jwk.d } as JsonWebKey);
      if (name === 'edge') await malformed(dOnly, 'edge: d without x');
      else assert.equal({ ...(await dOnly).publicJwk }, pub);
    }
  });

  test(`raw public keys on ${name}: Ed25519 32 bytes, P-256 65 and 33 bytes`, async () => {
    const ed = ctl.keys.actor;
    assert.equal(await c.toPublicJwk(new Uint8Array(Buffer.from(ed.publicJwk.x, 'base64url'))), ed.publicJwk);
    for (let i = 0; i < 4; i++) {
      const { publicKey } = nodeCrypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
      const jwk = publicKey.export({ format: 'jwk' });
      const x = Buffer.from(jwk.x!, 'base64url');
      const y = Buffer.from(jwk.y!, 'base64url');
      const want = { kty: 'EC', crv: 'P-256', x: jwk.x, y: jwk.y };
      assert.equal(
        await c.toPublicJwk(new Uint8Array(Buffer.concat([Buffer.from([4]), x, y])), { alg: 'ES256' }),
        want,
      );
      const prefix = 2 + (y[31]! & 1);
      assert.equal(
        await c.toPublicJwk(new Uint8Array(Buffer.concat([Buffer.from([prefix]), x])), { alg: 'ES256' }),
        want,
        'compressed',
      );
    }
  });

  // der.ts's PKCS#8 reader; the edge facade leaves private keys to WebCrypto (edge.ts).
  if (name !== 'edge')
    test(`PKCS#8 variants on ${name}: v2 Ed25519 with public key, P-256 with [0] parameters, literal \\n`, async () => {
      const a = ctl.keys.actor;
      const seed = hex(a.seedHex);
      const pub = new Uint8Array(Buffer.from(a.publicJwk.x, 'base64url'));
      const algId = der(0x30, hex('06032b6570'));
      const v2 = (p: Uint8Array) =>
        der(0x30, hex('020101'), algId, der(0x04, der(0x04, seed)), der(0x81, new Uint8Array([0, ...p])));
      assert.equal({ ...(await c.importSigningKey(pemOf('PRIVATE KEY', v2(pub)))).publicJwk }, a.publicJwk);
      const wrong = pub.slice();
      wrong[0]! ^= 1;
      await malformed(c.importSigningKey(pemOf('PRIVATE KEY', v2(wrong))), 'v2 with another public key');
      // P-256 ECPrivateKey with the optional [0] curve OID, as some encoders write it.
      const e = ctl.keys.actorP256;
      const dBytes = nodeCrypto.createPrivateKey(e.privateKeyPem).export({ format: 'jwk' }).d!;
      const point = new Uint8Array([
        4,
        ...Buffer.from(e.publicJwk.x, 'base64url'),
        ...Buffer.from(e.publicJwk.y, 'base64url'),
      ]);
      const ecAlg = der(0x30, hex('06072a8648ce3d0201'), hex('06082a8648ce3d030107'));
      const ecPriv = (...opt: Uint8Array[]) =>
        der(
          0x30,
          hex('020100'),
          ecAlg,
          der(0x04, der(0x30, hex('020101'), der(0x04, new Uint8Array(Buffer.from(dBytes, 'base64url'))), ...opt)),
        );
      const withParams = ecPriv(
        der(0xa0, hex('06082a8648ce3d030107')),
        der(0xa1, der(0x03, new Uint8Array([0, ...point]))),
      );
      assert.equal({ ...(await c.importSigningKey(pemOf('PRIVATE KEY', withParams))).publicJwk }, e.publicJwk);
      assert.equal(
        { ...(await c.importSigningKey(pemOf('PRIVATE KEY', ecPriv()))).publicJwk },
        e.publicJwk,
        'no public key',
      );
      await malformed(
        c.importSigningKey(pemOf('PRIVATE KEY', ecPriv(der(0xa0, hex('06052b81040022'))))),
        'P-384 parameters',
      );
      await malformed(
        c.importSigningKey(
          pemOf(
            'PRIVATE KEY',
            ecPriv(der(0xa1, der(0x03, new Uint8Array([0, 4, ...point.slice(1, 33), ...point.slice(1, 33)])))),
          ),
        ),
        'public key not matching',
      );
      // Compressed SPKI (node:crypto cannot write it; we read it).
      const y = point[64]! & 1;
      const spkiC = new Uint8Array([
        ...hex('3039301306072a8648ce3d020106082a8648ce3d030107032200'),
        2 + y,
        ...point.slice(1, 33),
      ]);
      assert.equal(await c.toPublicJwk(pemOf('PUBLIC KEY', spkiC)), e.publicJwk);
      // Env files often carry PEMs with the newlines written as \n.
      assert.equal(await c.toPublicJwk(a.publicKeyPem.replace(/\n/g, '\\n')), a.publicJwk);
    });

  test(`CryptoKey on ${name}: extractable and non-extractable, Ed25519 and P-256`, async () => {
    const subtle = globalThis.crypto.subtle;
    for (const algo of [{ name: 'Ed25519' }, { name: 'ECDSA', namedCurve: 'P-256' }]) {
      for (const extractable of [true, false]) {
        const pair = (await subtle.generateKey(algo, extractable, ['sign', 'verify'])) as CryptoKeyPair;
        // Browsers cannot derive the public half of a non-extractable key; node:crypto can, the edge facade does not
        // try.
        if (name === 'edge' && !extractable)
          await malformed(c.importSigningKey(pair.privateKey), 'edge: non-extractable without options.publicKey');
        const s = await c.importSigningKey(pair.privateKey, name === 'edge' ? { publicKey: pair.publicKey } : {});
        const v = await c.importVerifyingKey(pair.publicKey);
        assert.equal(s.publicJwk, v.publicJwk);
        const sig = await s.sign(msg);
        assert.ok(await v.verify(msg, sig), `${algo.name} extractable=${extractable}`);
        const webAlg = algo.name === 'Ed25519' ? algo : { name: 'ECDSA', hash: 'SHA-256' };
        assert.ok(
          await subtle.verify(webAlg, pair.publicKey, sig as Uint8Array<ArrayBuffer>, msg as Uint8Array<ArrayBuffer>),
          'WebCrypto accepts our signature',
        );
        if (!extractable) {
          // The public half named explicitly must be the right one: checked by signing once.
          const other = (await subtle.generateKey(algo, true, ['sign', 'verify'])) as CryptoKeyPair;
          await malformed(
            c.importSigningKey(pair.privateKey, { publicKey: other.publicKey }),
            'wrong options.publicKey',
          );
          const ok = await c.importSigningKey(pair.privateKey, { publicKey: pair.publicKey });
          assert.equal(ok.publicJwk, v.publicJwk);
        }
        await malformed(c.importSigningKey(pair.publicKey), 'public CryptoKey as a signing key');
      }
    }
    const hmacKey = await subtle.generateKey({ name: 'HMAC', hash: 'SHA-256' }, true, ['sign']);
    await malformed(c.importSigningKey(hmacKey as CryptoKey), 'HMAC CryptoKey');
  });

  test(`imported keys pass through on ${name}`, async () => {
    const k = ctl.keys.actor;
    const s = await c.importSigningKey(k.privateKeyPem);
    const v = await c.importVerifyingKey(k.publicJwk);
    assert.is(await c.importSigningKey(s), s);
    assert.is(await c.importVerifyingKey(v), v);
    assert.equal((await c.importVerifyingKey(s)).publicJwk, s.publicJwk);
    await malformed(c.importSigningKey(v as never), 'a verifying key as a signing key');
  });

  test(`refusals on ${name}: every wrong input is CtlError malformed`, async () => {
    const a = ctl.keys.actor;
    const e = ctl.keys.actorP256;
    const rsa = nodeCrypto.generateKeyPairSync('rsa', { modulusLength: 1024 });
    const x25519 = nodeCrypto.generateKeyPairSync('x25519');
    const secp256k1 = nodeCrypto.generateKeyPairSync('ec', { namedCurve: 'secp256k1' });
    const spkiDer = Buffer.from(a.publicKeyPem.split('\n').slice(1, -2).join(''), 'base64');
    const publicCases: [string, unknown, object?][] = [
      ['garbage string', 'not a key'],
      ['empty string', ''],
      ['RSA SPKI', rsa.publicKey.export({ format: 'pem', type: 'spki' })],
      ['X25519 SPKI', x25519.publicKey.export({ format: 'pem', type: 'spki' })],
      ['secp256k1 SPKI', secp256k1.publicKey.export({ format: 'pem', type: 'spki' })],
      ['PKCS#1 RSA PUBLIC KEY', rsa.publicKey.export({ format: 'pem', type: 'pkcs1' })],
      ['truncated SPKI', pemOf('PUBLIC KEY', spkiDer.subarray(0, 40))],
      ['SPKI with a trailing byte', pemOf('PUBLIC KEY', Buffer.concat([spkiDer, Buffer.from([0])]))],
      ['mismatched PEM labels', a.publicKeyPem.replace('END PUBLIC', 'END PRIVATE')],
      ['secp256k1 JWK', secp256k1.publicKey.export({ format: 'jwk' })],
      ['RSA JWK', rsa.publicKey.export({ format: 'jwk' })],
      ['OKP JWK with y', { ...a.publicJwk, y: a.publicJwk.x }],
      ['EC JWK without y', { kty: 'EC', crv: 'P-256', x: e.publicJwk.x }],
      ['JWK x with padding', { ...a.publicJwk, x: a.publicJwk.x + '=' }],
      [
        'JWK x in standard base64',
        { ...a.publicJwk, x: Buffer.from(a.publicJwk.x, 'base64url').toString('base64').replace(/=+$/, '') },
      ],
      ['JWK x of 31 bytes', okp(new Uint8Array(31).fill(9))],
      ['JWK alg not matching the curve', { ...a.publicJwk, alg: 'ES256' }],
      ['JWK not an object', 42],
      ['null', null],
      ['P-256 point off the curve', { ...e.publicJwk, y: b64u(new Uint8Array(32).fill(1)) }],
      ['P-256 x ≥ p', { ...e.publicJwk, x: b64u(new Uint8Array(32).fill(0xff)) }],
      ['P-256 raw identity (0x00)', new Uint8Array([0]), { alg: 'ES256' }],
      ['P-256 raw 64 bytes', new Uint8Array(64).fill(1), { alg: 'ES256' }],
      ['P-256 compressed x not on the curve', new Uint8Array([2, ...new Uint8Array(32).fill(0xff)]), { alg: 'ES256' }],
      ['Ed25519 raw 33 bytes', new Uint8Array(33)],
      ['Ed25519 y = 2 (not on the curve)', okp(edEncoding(2n))],
      ['Ed25519 y = p + 3 (non-canonical encoding of a curve point)', okp(edEncoding(P + 3n))],
      ['Ed25519 all ones', okp(new Uint8Array(32).fill(0xff))],
    ];
    // The 8 small-order points, and their non-canonical encodings (y + p for y < 19), with either sign bit.
    const C8 = 2707385501144840649318225287225658788936804267575313519463743609750303402022n;
    for (const y of [0n, 1n, P - 1n, C8, P - C8, P, P + 1n])
      for (const sign of [0, 1]) publicCases.push([`small order y=${y} sign=${sign}`, okp(edEncoding(y, sign))]);
    for (const [what, input, options] of publicCases) {
      await malformed(c.importVerifyingKey(input as never, options), what);
      if (input && typeof input === 'object' && 'kty' in (input as object))
        assert.not.ok(await c.verifyWithJwk(input as PublicJwk, msg, new Uint8Array(64)), what);
    }
    const privateCases: [string, unknown, object?][] = [
      ['public PEM as private', a.publicKeyPem],
      ['SEC1 EC PRIVATE KEY', nodeCrypto.createPrivateKey(e.privateKeyPem).export({ format: 'pem', type: 'sec1' })],
      ['RSA PKCS#8', rsa.privateKey.export({ format: 'pem', type: 'pkcs8' })],
      ['X25519 PKCS#8', x25519.privateKey.export({ format: 'pem', type: 'pkcs8' })],
      [
        'encrypted PKCS#8',
        rsa.privateKey.export({ format: 'pem', type: 'pkcs8', cipher: 'aes-128-cbc', passphrase: 'x' }),
      ],
      ['raw 31 bytes', new Uint8Array(31)],
      ['P-256 scalar 0', new Uint8Array(32), { alg: 'ES256' }],
      ['P-256 scalar n', hex('ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551'), { alg: 'ES256' }],
      ['P-256 scalar 2^256 - 1', new Uint8Array(32).fill(0xff), { alg: 'ES256' }],
      ['an array', [1, 2, 3]],
      ['undefined', undefined],
    ];
    // der.ts's DER strictness; the edge facade leaves private keys to WebCrypto (edge.ts), which may be laxer.
    if (name !== 'edge') {
      const seed = ctl.keys.actor.seedHex;
      privateCases.push(
        [
          'PKCS#8 with a long-form length that is not minimal',
          pemOf('PRIVATE KEY', hex('30812e020100300506032b657004220420' + seed)),
        ],
        ['PKCS#8 version 2', pemOf('PRIVATE KEY', hex('302e020102300506032b657004220420' + seed))],
        ['PKCS#8 with a trailing byte', pemOf('PRIVATE KEY', hex('302e020100300506032b657004220420' + seed + '00'))],
      );
    }
    for (const [what, input, options] of privateCases)
      await malformed(c.importSigningKey(input as never, options), what);
  });

  test(`verifyWithJwk and verify never throw on ${name}`, async () => {
    const k = ctl.keys.actor;
    const s = await c.importSigningKey(k.privateKeyPem);
    const sig = await s.sign(msg);
    assert.ok(await c.verifyWithJwk(k.publicJwk, msg, sig));
    const v = await c.importVerifyingKey(k.publicJwk);
    for (const bad of [
      sig.subarray(0, 63),
      new Uint8Array([...sig, 0]),
      new Uint8Array(0),
      'sig',
      null,
      undefined,
      [...sig],
    ]) {
      assert.not.ok(await v.verify(msg, bad as never));
      assert.not.ok(await c.verifyWithJwk(k.publicJwk, msg, bad as never));
    }
    assert.not.ok(await v.verify('message' as never, sig));
    assert.not.ok(await c.verifyWithJwk(null as never, msg, sig));
    assert.not.ok(await c.verifyWithJwk({ kty: 'RSA' } as never, msg, sig));
  });
}

test.run();
