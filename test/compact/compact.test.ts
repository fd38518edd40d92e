/**
 * The compact form (PROTOCOL.md §6): deterministic CBOR of the same JSON model. The compact SBA
 * verifies exactly as the JSON one (signatures are over JCS bytes); decoding refuses every
 * non-canonical encoding; sizes of a typical SBA are printed (JSON, base64 header, CBOR).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import fc from 'fast-check';
import * as CTL from '../../src/index.js';
import { encodeCompact, decodeCompact, compactKind } from '../../src/compact.js';
import { cborDecode, cborEncode } from '../../src/encoding/cbor.js';
import { makeFleet, T0 } from '../offline/fleet.js';

const fleet = await makeFleet(CTL, { offline: { maxPayments: 10, maxAmountMinor: '50000' } });
const bundle = await fleet.bundle(3);
const sba = await fleet.sba('1250');
const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
const unhex = (s: string) => new Uint8Array(s.match(/../g)!.map((x) => parseInt(x, 16)));

test('RFC 8949 §4.2.1 order and shortest forms, byte for byte', () => {
  // Keys: shorter first, then bytewise; "10" is not moved first as in a JS object.
  assert.is(
    hex(cborEncode({ b: 1, a: [true, 'x'], '10': null, aa: -24 })),
    'a4' + '6161' + '82f56178' + '6162' + '01' + '623130' + 'f6' + '626161' + '37',
  );
});

test('round trip: decodeCompact(encodeCompact(x)) is x, for an SBA and a bundle', () => {
  assert.equal(decodeCompact(encodeCompact(sba), 'sba'), sba);
  assert.equal(decodeCompact(encodeCompact(bundle), 'bundle'), bundle);
  assert.is(compactKind(encodeCompact(bundle)), 'bundle');
  assert.ok(
    encodeCompact(sba) instanceof Uint8Array && encodeCompact(sba).constructor === Uint8Array,
    'a plain Uint8Array, not a Buffer',
  );
});

test('the compact SBA verifies exactly as the JSON one, valid and refused alike', async () => {
  const opts = (amount: string) => ({
    amount,
    currency: 'EUR',
    offline: true,
    spendStorage: CTL.createMemorySpendStorage(),
    trustBundles: [bundle],
    rootPublicKeyPem: fleet.root.publicKeyPem,
    now: () => T0,
  });
  for (const amount of ['1250', '1251', '1']) {
    const a = await CTL.verifyCtl(sba, opts(amount));
    const b = await CTL.verifyCtl(decodeCompact(encodeCompact(sba), 'sba'), opts(amount));
    assert.equal({ ...b, sba: undefined, grant: undefined }, { ...a, sba: undefined, grant: undefined }, amount);
  }
  const tampered = { ...sba, authorization: { ...sba.authorization, maxAmountMinor: '9999' } };
  const t = await CTL.verifyCtl(decodeCompact(cborEncode(tampered), 'sba'), opts('1250'));
  assert.is(!t.valid && t.error.code, 'sba_signature_invalid');
  const rb = await CTL.verifyTrustBundle(decodeCompact(encodeCompact(bundle), 'bundle'), fleet.root.publicKeyPem, {
    now: () => T0,
  });
  assert.ok(rb.valid);
});

test('decoding refuses non-canonical encodings of a valid SBA', () => {
  const good = encodeCompact(sba);
  const variants: Array<[string, Uint8Array]> = [];
  // 1. a map header with a longer-than-needed length (a5 → b8 05).
  variants.push(['long map head', new Uint8Array([0xb8, good[0]! & 0x1f, ...good.slice(1)])]);
  // 2. indefinite-length map.
  variants.push(['indefinite map', new Uint8Array([0xbf, ...good.slice(1), 0xff])]);
  // 3. trailing byte.
  variants.push(['trailing byte', new Uint8Array([...good, 0x00])]);
  // 4. the version (1) as a two-byte integer: find "version" key then 01.
  const key = [0x67, ...'version'].map((c) => (typeof c === 'number' ? c : c.charCodeAt(0)));
  const at = hex(good).indexOf(hex(new Uint8Array([...key, 0x01]))) / 2;
  assert.ok(at > 0);
  variants.push(['long integer', new Uint8Array([...good.slice(0, at + 8), 0x18, 0x01, ...good.slice(at + 9)])]);
  // 5. a tag around the whole thing.
  variants.push(['tagged', new Uint8Array([0xd8, 0x40, ...good])]);
  for (const [name, bytes] of variants) {
    assert.throws(
      () => decodeCompact(bytes),
      (e: any) => e.code === 'malformed',
      name,
    );
  }
  // 6. keys out of order: swap the first two members by hand via a non-sorting encoder path.
  assert.throws(
    () => cborDecode(unhex('a2616201616101')),
    (e: any) => e.code === 'malformed',
    'unsorted keys',
  );
  assert.throws(
    () => cborDecode(unhex('a2616101616102')),
    (e: any) => e.code === 'malformed',
    'duplicate keys',
  );
  assert.throws(
    () => cborDecode(unhex('fb3ff0000000000000')),
    (e: any) => e.code === 'malformed',
    'float 1.0',
  );
  assert.throws(
    () => decodeCompact(cborEncode({ ...sba, extra: new Uint8Array(1) })),
    (e: any) => e.code === 'malformed',
    'bytes are not JSON',
  );
  assert.throws(
    () => decodeCompact(encodeCompact(bundle), 'sba'),
    (e: any) => e.code === 'malformed',
    'kind mismatch',
  );
});

test(
  'property: any CBOR the encoder makes decodes to the same value; any one-byte change ' +
    'that still decodes re-encodes identically',
  () => {
    const json = fc.letrec((tie) => ({
      v: fc.oneof(
        { depthSize: 'small' },
        fc.string(),
        fc.integer(),
        fc.boolean(),
        fc.constant(null),
        fc.array(tie('v'), { maxLength: 4 }),
        fc.dictionary(fc.string({ maxLength: 8 }), tie('v'), { maxKeys: 4 }),
      ),
    })).v;
    fc.assert(
      fc.property(json, fc.nat(), fc.integer({ min: 0, max: 255 }), (v, pos, byte) => {
        const bytes = cborEncode(v);
        assert.equal(cborDecode(bytes), JSON.parse(JSON.stringify(v)));
        const m = bytes.slice();
        m[pos % m.length] = byte;
        let d: unknown;
        try {
          d = cborDecode(m);
        } catch {
          return true;
        }
        return hex(cborEncode(d)) === hex(m); // whatever decodes is canonical by construction
      }),
      { numRuns: 500 },
    );
  },
);

test('sizes of a typical SBA: JSON, base64 header, CBOR', () => {
  const json = new TextEncoder().encode(CTL.canonicalize(sba)).length;
  const header = CTL.encodeSbaHeader(sba).length;
  const cbor = encodeCompact(sba).length;
  const bundleJson = new TextEncoder().encode(CTL.canonicalize(bundle)).length;
  const bundleCbor = encodeCompact(bundle).length;
  console.log(
    `SIZES typical SBA (Ed25519, grant embedded): JSON ${json} B, "Authorization: CTL ` +
      `<base64>" ${header} B, CBOR ${cbor} B (${Math.round((100 * cbor) / json)}% of JSON)`,
  );
  console.log(`SIZES one-issuer bundle: JSON ${bundleJson} B, CBOR ${bundleCbor} B`);
  assert.ok(cbor < json && json < header, 'CBOR < JSON < base64 header');
});

test.run();
