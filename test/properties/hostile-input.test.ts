/**
 * Hostile input never throws from a verifier (PROTOCOL.md §5, ARCHITECTURE.md rule 6): verifyCtl,
 * verifyTrustBundle and verifyReceipt always resolve to `{ valid: false, error: { code, message } }`
 * with a code of PROTOCOL.md §9, whatever they are given.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import fc from 'fast-check';
import { ERROR_CODES } from '../../src/index.js';
import { createCtlCrypto } from '../../src/crypto/index.js';
import { createVerifier } from '../../src/verifier/verify.js';
import { verifyBundleWith } from '../../src/artifacts/bundle.js';
import { verifyReceiptWith } from '../../src/artifacts/receipt.js';
import { material, now, params, type Material } from './fixtures.js';

const c = createCtlCrypto('native');
const m: Material = await material(c);
const verifyCtl = createVerifier(c);
const ctlOptions = () => ({
  amount: '30',
  currency: 'USD',
  merchantId: 'merchant-a',
  signingKeyPem: m.authority.publicKeyPem,
  offline: true,
  now,
});

type Verifier = { name: string; run: (input: unknown) => Promise<unknown> };
const verifiers: Verifier[] = [
  { name: 'verifyCtl', run: (x) => verifyCtl(x, ctlOptions()) },
  { name: 'verifyTrustBundle', run: (x) => verifyBundleWith(c, x, m.root.publicKeyPem, { now }) },
  { name: 'verifyReceipt', run: (x) => verifyReceiptWith(c, x, { publicKey: m.gateway.publicKeyPem }) },
];

/** Calls the verifier and checks the refusal shape; returns the code (or a description of the failure). */
async function refusal(run: () => Promise<unknown>): Promise<string> {
  let r: any;
  try {
    r = await run();
  } catch (e) {
    let what: string;
    try {
      what = String((e as Error)?.message ?? e);
    } catch {
      what = Object.prototype.toString.call(e);
    }
    return `THREW: ${what}`;
  }
  if (!r || r.valid !== false) return `not a refusal: ${safeJson(r)}`;
  if (!r.error || typeof r.error.message !== 'string') return `bad error shape: ${safeJson(r)}`;
  if (!(ERROR_CODES as readonly string[]).includes(r.error.code)) return `unknown code ${r.error.code}`;
  return r.error.code;
}
const isCode = (s: string) => (ERROR_CODES as readonly string[]).includes(s);
function safeJson(x: unknown) {
  try {
    return JSON.stringify(x)?.slice(0, 200);
  } catch {
    return String(typeof x);
  }
}

// ---------------------------------------------------------------------------------------------
// Hostile values

const bomb = () => ({
  toString() {
    throw new Error('toString bomb');
  },
  valueOf() {
    throw new Error('valueOf bomb');
  },
});
const revoked = () => {
  const p = Proxy.revocable({}, {});
  p.revoke();
  return p.proxy;
};
const throwingProxy = () =>
  new Proxy(
    {},
    new Proxy(
      {},
      {
        get: () => () => {
          throw new Error('trap');
        },
      },
    ),
  );
const errorWithBadMessage = () => {
  const e = new Error('x');
  Object.defineProperty(e, 'message', {
    get() {
      throw new Error('message getter');
    },
  });
  return e;
};
/** What a getter may throw: ordinary errors, and values that are hostile to the error handler itself. */
const THROWN = [
  'error',
  'string',
  'undefined',
  'number',
  'bomb',
  'revoked',
  'nullproto',
  'badmessage',
  'symbol',
] as const;
/** Labels, not values, so fast-check can print a counterexample without tripping over it. */
const thrown = fc.constantFrom(...THROWN);
function makeThrown(k: (typeof THROWN)[number]): unknown {
  switch (k) {
    case 'error':
      return new TypeError('boom');
    case 'string':
      return 'boom';
    case 'undefined':
      return undefined;
    case 'number':
      return 42;
    case 'bomb':
      return bomb();
    case 'revoked':
      return revoked();
    case 'nullproto':
      return Object.create(null);
    case 'badmessage':
      return errorWithBadMessage();
    default:
      return Symbol('s');
  }
}

/** An object like `base` where one member (at any depth) is replaced by a getter that throws. */
function withThrowingGetter(base: unknown, pathPick: number, value: (typeof THROWN)[number]): unknown {
  const copy = deepCopy(base) as any;
  const paths = objectPaths(copy);
  const path = paths[pathPick % paths.length]!;
  let o = copy;
  for (const k of path.slice(0, -1)) o = o[k];
  Object.defineProperty(o, path[path.length - 1]!, {
    get() {
      throw makeThrown(value);
    },
    enumerable: true,
    configurable: true,
  });
  return copy;
}

/** structuredClone that keeps functions (option bags hold `now`). */
function deepCopy(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(deepCopy);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, deepCopy(x)]));
  return v;
}

/** Every path to a member of an object (arrays included), depth first. */
function objectPaths(v: unknown, prefix: (string | number)[] = [], out: (string | number)[][] = []) {
  if (v && typeof v === 'object') {
    for (const k of Object.keys(v)) {
      const p = [...prefix, Array.isArray(v) ? Number(k) : k];
      out.push(p);
      objectPaths((v as any)[k], p, out);
    }
  }
  return out;
}

function setPath(base: unknown, path: (string | number)[], value: unknown): any {
  const copy = structuredClone(base) as any;
  let o = copy;
  for (const k of path.slice(0, -1)) o = o[k];
  o[path[path.length - 1]!] = value;
  return copy;
}

const jsonType = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);

// ---------------------------------------------------------------------------------------------

test('sanity: the valid artifacts verify (so refusals below are caused by the mutation)', async () => {
  assert.is(((await verifyCtl(m.sba, ctlOptions())) as any).valid, true);
  assert.is(((await verifyBundleWith(c, m.bundle, m.root.publicKeyPem, { now })) as any).valid, true);
  assert.is(((await verifyReceiptWith(c, m.receipt, { publicKey: m.gateway.publicKeyPem })) as any).valid, true);
});

for (const v of verifiers) {
  test(`${v.name}: fc.anything() → a refusal with a §9 code (1000 runs)`, async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.anything({
          withNullPrototype: true,
          withBigInt: true,
          withDate: true,
          withMap: true,
          withSet: true,
          withTypedArray: true,
          withSparseArray: true,
          withBoxedValues: true,
        }),
        async (x) => {
          const code = await refusal(() => v.run(x));
          if (!isCode(code)) throw new Error(code);
        },
      ),
      params(1000),
    );
  });

  test(`${v.name}: JSON text of anything, __proto__/constructor keys, huge and deep inputs (300 runs)`, async () => {
    const proto = fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty');
    const protoDoc = fc
      .tuple(proto, fc.jsonValue())
      .map(([k, val]) => `{"${k}":${JSON.stringify(val) ?? 'null'},"version":1}`);
    const deepText = fc.integer({ min: 60, max: 100_000 }).map((d) => '['.repeat(d) + ']'.repeat(d));
    const deepObj = fc.integer({ min: 60, max: 5_000 }).map((d) => {
      let o: any = {};
      for (let i = 0; i < d; i++) o = { version: 1, authorization: o, grant: o };
      return o;
    });
    const huge = fc.integer({ min: 1 << 20, max: 3 << 20 }).map((n) => '"' + 'a'.repeat(n) + '"');
    const hugeMember = fc.integer({ min: 1 << 16, max: 1 << 21 }).map((n) => ({ ...m.sba, keyId: 'k'.repeat(n) }));
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.json(), protoDoc, deepText, deepObj, huge, hugeMember, fc.string({ unit: 'binary' })),
        async (x) => {
          const code = await refusal(() => v.run(x));
          if (!isCode(code)) throw new Error(code);
        },
      ),
      params(300),
    );
  });
}

test('__proto__ as an own member of a valid SBA and of its grant is refused (closed objects)', async () => {
  for (const where of ['sba', 'authorization', 'grant'] as const) {
    const s = structuredClone(m.sba) as any;
    const target = where === 'sba' ? s : where === 'authorization' ? s.authorization : s.grant;
    Object.defineProperty(target, '__proto__', {
      value: { polluted: true },
      enumerable: true,
      configurable: true,
      writable: true,
    });
    const code = await refusal(() => verifyCtl(s, ctlOptions()));
    assert.is(code, 'malformed', where);
    const text = JSON.stringify(m.sba).replace('{"version":1,', '{"__proto__":{"version":2},"version":1,');
    assert.is(await refusal(() => verifyCtl(text, ctlOptions())), 'malformed');
  }
  assert.is(({} as any).polluted, undefined, 'Object.prototype untouched');
});

test('an object with a polluted prototype chain (inherited members) is refused', async () => {
  const s = Object.assign(Object.create({ extra: 1 }), structuredClone(m.sba));
  assert.is(await refusal(() => verifyCtl(s, ctlOptions())), 'malformed');
});

for (const v of verifiers) {
  const base = v.name === 'verifyCtl' ? m.sba : v.name === 'verifyTrustBundle' ? m.bundle : m.receipt;
  test(`${v.name}: a getter that throws anything, at any member of a valid artifact (1000 runs)`, async () => {
    await fc.assert(
      fc.asyncProperty(fc.nat(), thrown, async (pick, value) => {
        const x = withThrowingGetter(base, pick, value);
        const code = await refusal(() => v.run(x));
        if (!isCode(code)) throw new Error(code);
      }),
      params(1000),
    );
  });

  test(`${v.name}: Proxies (revoked, throwing traps, lying traps) as the artifact or any member`, async () => {
    const proxies = [
      revoked,
      throwingProxy,
      () => new Proxy(structuredClone(base) as object, { ownKeys: () => ['version', 'version'] }),
      () =>
        new Proxy(structuredClone(base) as object, {
          getPrototypeOf: () => Object.prototype,
          get: (t, k) => (k === 'signature' ? 42 : (t as any)[k]),
        }),
    ];
    await fc.assert(
      fc.asyncProperty(fc.nat(), fc.nat({ max: proxies.length - 1 }), fc.boolean(), async (pick, which, whole) => {
        const p = proxies[which]!();
        const x = whole
          ? p
          : (() => {
              const paths = objectPaths(base);
              return setPath(base, paths[pick % paths.length]!, p);
            })();
        const code = await refusal(() => v.run(x));
        if (!isCode(code)) throw new Error(code);
      }),
      params(300),
    );
  });

  test(`${v.name}: wrong type in every member of a valid artifact → malformed`, async () => {
    const paths = objectPaths(base);
    await fc.assert(
      fc.asyncProperty(
        fc.nat(),
        fc.anything({ withBigInt: true, withDate: true, withMap: true, withSet: true }),
        async (pick, value) => {
          const path = paths[pick % paths.length]!;
          let old: any = base;
          for (const k of path) old = old[k];
          fc.pre(value !== undefined && jsonType(value) !== jsonType(old));
          const code = await refusal(() => v.run(setPath(base, path, value)));
          if (code !== 'malformed') throw new Error(`${path.join('.')} = ${safeJson(value)}: ${code}`);
        },
      ),
      params(2000),
    );
  });
}

test('hostile options and keys never throw either', async () => {
  await fc.assert(
    fc.asyncProperty(fc.anything(), thrown, fc.nat(), async (opt, value, pick) => {
      const hostileOptions = withThrowingGetter(
        { ...ctlOptions(), rail: 'x402', trustBundles: [m.bundle], rootPublicKeyPem: 'x', trackSpend: true },
        pick,
        value,
      );
      for (const run of [
        () => verifyCtl(m.sba, opt as any),
        () => verifyCtl(m.sba, hostileOptions as any),
        () => verifyBundleWith(c, m.bundle, opt as any, opt as any),
        () => verifyReceiptWith(c, m.receipt, opt as any),
      ]) {
        const code = await refusal(run);
        if (!isCode(code)) throw new Error(code);
      }
    }),
    params(500),
  );
});

test.run();
