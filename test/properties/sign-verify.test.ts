/**
 * sign → verify for every artifact with random valid fields, signed on each backend and verified on
 * both (PROTOCOL.md §3–5); and any single-byte change of a signed artifact's JSON text that still
 * parses makes it invalid.
 */
import { test } from 'uvu';
import fc from 'fast-check';
import { formatTimestamp, parseStrictJson } from '../../src/index.js';
import { withFreshLedger } from '../helpers/fresh-ledger.js';
import { createCtlCrypto } from '../../src/crypto/index.js';
import type { CtlCrypto, PublicJwk } from '../../src/crypto/types.js';
import { createGrantWith } from '../../src/artifacts/grant.js';
import { createSbaWith } from '../../src/artifacts/sba.js';
import { createBundleWith, verifyBundleWith } from '../../src/artifacts/bundle.js';
import { signReceiptWith, verifyReceiptWith } from '../../src/artifacts/receipt.js';
import { createVerifier } from '../../src/verifier/verify.js';
import { makeKey, material, now as fixedNow, params, runs, type TestKey } from './fixtures.js';
import { registerP256 } from '../../src/crypto/algorithm-support.js';
import { nobleP256 } from '../../src/entries/p256.js';

// The noble backend as a QuickJS host builds it: P-256 registered from ctl/p256.
registerP256(nobleP256);

const backends = { native: createCtlCrypto('native'), noble: createCtlCrypto('noble') };
const names = ['native', 'noble'] as const;

const pool = { EdDSA: [makeKey('EdDSA'), makeKey('EdDSA')], ES256: [makeKey('ES256'), makeKey('ES256')] };
const anyKey = fc.constantFrom<TestKey>(...pool.EdDSA, ...pool.ES256);
const jwkOf = new Map<TestKey, PublicJwk>();
for (const k of [...pool.EdDSA, ...pool.ES256]) jwkOf.set(k, await backends.native.toPublicJwk(k.publicKeyPem));
const published = (k: TestKey, kid: string, purposes: string[]) => ({ ...jwkOf.get(k)!, kid, alg: k.alg, purposes });

// ---------------------------------------------------------------------------------------------
// Arbitraries of valid values (PROTOCOL.md §1)

const id = fc.stringMatching(/^[A-Za-z0-9._:-]{1,40}$/);
const printable = (max: number) => fc.stringMatching(new RegExp(`^[\\x21-\\x7e]{1,${max}}$`));
const currency = fc.stringMatching(/^[A-Z0-9]{3,12}$/);
const part = fc.stringMatching(/^[a-z0-9][a-z0-9._-]{0,20}$/);
const rail = fc.stringMatching(/^[A-Za-z0-9._:-]{1,20}$/);
const asset = fc.record({ standard: fc.stringMatching(/^[a-z0-9._-]{1,32}$/), code: currency });
const T0 = Date.parse('2020-01-01T00:00:00Z');
const DAY = 86_400_000;

const scenario = fc.record({
  grantId: id,
  sessionId: id,
  budgetId: id,
  keyId: id,
  actorKid: id,
  actorId: printable(60),
  issuer: printable(80),
  currency,
  rails: fc.uniqueArray(rail, { minLength: 1, maxLength: 4 }),
  railPick: fc.nat(),
  assets: fc.array(asset, { maxLength: 3 }),
  domain: part,
  kind: part,
  purposeMode: fc.constantFrom('none', 'exact', 'wildcard', 'absent'),
  merchant: printable(60),
  destMode: fc.constantFrom('none', 'list', 'absent'),
  otherDest: fc.uniqueArray(printable(40), { maxLength: 3 }),
  grantMax: fc.bigInt({ min: 1n, max: 10n ** 38n - 1n }),
  sbaFrac: fc.bigInt({ min: 1n, max: 1000n }),
  payFrac: fc.bigInt({ min: 1n, max: 1000n }),
  t0: fc.integer({ min: 0, max: 3650 * DAY }),
  age: fc.integer({ min: 0, max: 30 * DAY }),
  left: fc.integer({ min: 1, max: 30 * DAY }),
  sbaAge: fc.integer({ min: 0, max: DAY }),
  sbaLeftFrac: fc.double({ min: 0, max: 1, noNaN: true }),
  scope: fc.constantFrom('SESSION', 'TRIP') as fc.Arbitrary<'SESSION' | 'TRIP'>,
  withIssuer: fc.boolean(),
  // Velocity is enforced (PROTOCOL.md §8) wherever spend is recorded: windows that admit one payment of any size.
  velocity: fc.option(
    fc.record(
      {
        maxPaymentsPerHour: fc.integer({ min: 1, max: 1000 }),
        maxAmountPerMerchantPerDay: fc.constant('9'.repeat(38)),
      },
      { requiredKeys: [] },
    ),
    { nil: undefined },
  ),
  offline: fc.option(fc.record({ maxBundleAgeMs: fc.constant(365 * DAY) }, { requiredKeys: [] }), { nil: undefined }),
  trust: fc.constantFrom('pem', 'bundle', 'jwks'),
  authority: anyKey,
  actor: anyKey,
  url: printable(60).map((s) => `https://${s}`),
});

async function chain(c: CtlCrypto, s: typeof scenario extends fc.Arbitrary<infer T> ? T : never) {
  const nowMs = T0 + s.t0 + s.age;
  const gExp = nowMs + s.left;
  const sbaIss = nowMs - s.sbaAge;
  const sbaExp = nowMs + Math.max(1, Math.floor(s.left * s.sbaLeftFrac));
  const purpose = `${s.domain}:${s.kind}`;
  const allowedPurposes =
    s.purposeMode === 'exact' ? [purpose] : s.purposeMode === 'wildcard' ? [`${s.domain}:*`] : undefined;
  const destinationAllowlist = s.destMode === 'list' ? [...new Set([...s.otherDest, s.merchant])] : undefined;
  const sbaMax = (s.grantMax * s.sbaFrac + 999n) / 1000n;
  // With merchantId the SBA carries an intentHash, which binds the exact amount: pay all of it then.
  const pay = s.destMode === 'absent' ? (sbaMax * s.payFrac + 999n) / 1000n : sbaMax;
  const grant = await createGrantWith(
    c,
    {
      grantId: s.grantId,
      policyHash: 'ab'.repeat(32),
      issuedAt: formatTimestamp(T0 + s.t0),
      expiresAt: formatTimestamp(gExp),
      allowedRails: s.rails,
      allowedAssets: s.assets,
      allowedPurposes,
      maxAmountMinor: s.grantMax.toString(),
      currency: s.currency,
      destinationAllowlist,
      revocationUrl: s.url,
      actorKey: s.actor.publicKeyPem,
      velocity: s.velocity,
      offline: s.offline,
    },
    { issuer: s.issuer, keyId: s.keyId, signingKey: s.authority.privateKeyPem },
  );
  const sba = await createSbaWith(
    c,
    {
      grant,
      sessionId: s.sessionId,
      actorId: s.actorId,
      maxAmountMinor: sbaMax.toString(),
      budgetScope: s.scope,
      budgetId: s.budgetId,
      issuedAt: formatTimestamp(sbaIss),
      expiresAt: formatTimestamp(sbaExp),
      rail: s.rails[s.railPick % s.rails.length],
      merchantId: s.destMode === 'absent' ? undefined : s.merchant,
      purpose: s.purposeMode === 'absent' ? undefined : purpose,
      issuer: s.withIssuer || s.trust === 'bundle' ? s.issuer : undefined,
    },
    { signingKey: s.actor.privateKeyPem, keyId: s.actorKid, now: () => sbaIss },
  );
  const keyEntry = published(s.authority, s.keyId, ['grant']);
  const trust =
    s.trust === 'pem'
      ? { signingKeyPem: s.authority.publicKeyPem }
      : s.trust === 'jwks'
        ? { jwks: { keys: [keyEntry] as any } }
        : {
            rootPublicKeyPem: pool.EdDSA[0]!.publicKeyPem,
            trustBundles: [
              await createBundleWith(
                c,
                {
                  sequence: 1,
                  scope: {},
                  issuers: [{ issuer: s.issuer, keys: [keyEntry as any] }],
                  revokedGrants: [],
                  issuedAt: formatTimestamp(nowMs - 1000),
                  expiresAt: formatTimestamp(nowMs + DAY),
                },
                { signingKey: pool.EdDSA[0]!.privateKeyPem, issuer: 'root.example', bundleId: 'b1' } as any,
              ),
            ],
          };
  const options = {
    amount: pay.toString(),
    currency: s.currency,
    merchantId: s.destMode === 'absent' ? undefined : s.merchant,
    offline: true,
    now: () => nowMs,
    requireIntentHash: s.destMode !== 'absent',
    ...trust,
  };
  return { grant, sba, options };
}

for (const signer of names) {
  test(
    `chain (grant + SBA, PEM / bundle / JWKS trust): signed on ${signer}, verified on ` + `both (${runs(80)} runs)`,
    async () => {
      const c = backends[signer];
      await fc.assert(
        fc.asyncProperty(scenario, async (s) => {
          const { sba, options } = await chain(c, s);
          // A bundle-age limit offline with no bundle to vouch (a pinned key, a JWKS) refuses (PROTOCOL.md §12).
          const want =
            s.offline?.maxBundleAgeMs !== undefined && s.trust !== 'bundle' ? 'offline_limit_exceeded' : 'valid';
          for (const verifier of names) {
            const r = await createVerifier(backends[verifier])(sba, options);
            if ((r.valid ? 'valid' : r.error.code) !== want)
              throw new Error(`${verifier}: ${JSON.stringify(r)}, expected ${want}`);
            const t = await createVerifier(backends[verifier])(JSON.stringify(sba), options);
            if ((t.valid ? 'valid' : t.error.code) !== want)
              throw new Error(`${verifier} (text): ${JSON.stringify(t)}, expected ${want}`);
          }
        }),
        params(runs(80)),
      );
    },
  );

  test(`Trust Bundle: signed on ${signer}, verified on both (${runs(150)} runs)`, async () => {
    const c = backends[signer];
    const keyEntry = fc
      .tuple(
        anyKey,
        id,
        fc.subarray(['grant', 'sba', 'bundle', 'receipt', 'webhook'], { minLength: 1 }),
        fc.constantFrom(undefined, 'active', 'retired'),
      )
      .map(([k, kid, purposes, status]) => ({ ...published(k, kid, purposes), ...(status ? { status } : {}) }));
    const fields = fc.record({
      bundleId: id,
      sequence: fc.nat(),
      issuedAge: fc.integer({ min: 0, max: 30 * DAY }),
      left: fc.integer({ min: 1, max: 365 * DAY }),
      scope: fc.record(
        { category: printable(30), merchant: printable(30), region: printable(30) },
        { requiredKeys: [] },
      ),
      issuers: fc.array(
        fc.record({ issuer: printable(60), keys: fc.array(keyEntry, { minLength: 1, maxLength: 3 }) }),
        { maxLength: 3 },
      ),
      revokedGrants: fc.array(id, { maxLength: 5 }),
      root: anyKey,
      rootKid: id,
      issuer: printable(60),
      minDelta: fc.nat({ max: 5 }),
    });
    await fc.assert(
      fc.asyncProperty(fields, async (f) => {
        const nowMs = T0 + 2000 * DAY;
        const b = await createBundleWith(
          c,
          {
            bundleId: f.bundleId,
            sequence: f.sequence,
            scope: f.scope,
            issuers: f.issuers as any,
            revokedGrants: f.revokedGrants,
            issuedAt: formatTimestamp(nowMs - f.issuedAge),
            expiresAt: formatTimestamp(nowMs + f.left),
          },
          { signingKey: f.root.privateKeyPem, keyId: f.rootKid, issuer: f.issuer },
        );
        for (const verifier of names) {
          const r = await verifyBundleWith(backends[verifier], JSON.stringify(b), f.root.publicKeyPem, {
            now: () => nowMs,
            minSequence: Math.max(0, f.sequence - f.minDelta),
          });
          if (!r.valid) throw new Error(`${verifier}: ${JSON.stringify(r.error)}`);
        }
      }),
      params(runs(150)),
    );
  });

  test(`Receipt: signed on ${signer}, verified on both by PEM and JWKS (${runs(150)} runs)`, async () => {
    const c = backends[signer];
    const m = await material(c);
    const fields = fc.record({
      receiptId: fc.stringMatching(/^[A-Za-z0-9._:-]{1,40}$/).map((x) => 'rcpt_' + x),
      sessionId: id,
      grantId: id,
      purpose: fc.tuple(part, part).map(([a, b]) => `${a}:${b}`),
      amountMinor: fc.bigInt({ min: 0n, max: 10n ** 38n - 1n }).map(String),
      currency,
      merchant: printable(100),
      paidAt: fc.integer({ min: 0, max: 4000 * DAY }).map((d) => formatTimestamp(T0 + d)),
      txRef: printable(100).map((x) => 'txid:' + x),
      rail,
      withSba: fc.boolean(),
      key: anyKey,
      kid: id,
    });
    await fc.assert(
      fc.asyncProperty(fields, async (f) => {
        const r = await signReceiptWith(
          c,
          {
            receiptId: f.receiptId,
            sessionId: f.sessionId,
            grantId: f.grantId,
            purpose: f.purpose,
            amount: { amountMinor: f.amountMinor, currency: f.currency },
            merchant: f.merchant,
            paidAt: f.paidAt,
            txRef: f.txRef,
            rail: f.rail,
            ...(f.withSba ? { sba: m.sba } : {}),
          },
          { signingKey: f.key.privateKeyPem, keyId: f.kid },
        );
        for (const verifier of names) {
          const a = await verifyReceiptWith(backends[verifier], r, { publicKey: f.key.publicKeyPem });
          const b = await verifyReceiptWith(backends[verifier], JSON.stringify(r), {
            jwks: { keys: [published(f.key, f.kid, ['receipt']) as any] },
          });
          if (!a.valid || !b.valid) throw new Error(`${verifier}: ${JSON.stringify([a, b])}`);
        }
      }),
      params(runs(150)),
    );
  });
}

// ---------------------------------------------------------------------------------------------
// Any single-byte change of the JSON text that still parses → invalid

const PRINTABLE = Array.from({ length: 0x7f - 0x20 }, (_, i) => String.fromCharCode(0x20 + i));

async function mutationProperty(text: string, verify: (t: string) => Promise<{ valid: boolean }>, count: number) {
  const positions = fc.nat({ max: text.length - 1 });
  await fc.assert(
    fc.asyncProperty(positions, fc.constantFrom(...PRINTABLE), async (i, ch) => {
      fc.pre(text[i] !== ch);
      const mutated = text.slice(0, i) + ch + text.slice(i + 1);
      try {
        parseStrictJson(mutated);
      } catch {
        fc.pre(false);
      }
      const r = await verify(mutated);
      if (r.valid)
        throw new Error(`accepted after changing byte ${i} from ${JSON.stringify(text[i])} to ${JSON.stringify(ch)}`);
    }),
    { ...params(count), maxSkipsPerRun: 1000 },
  );
}

for (const backend of names) {
  const c = backends[backend];
  const m = await material(c);
  const verifyCtl = createVerifier(c);
  // One SBA is verified many times here: what is compared is the signature, not replay.
  const ctlOptions = withFreshLedger({
    amount: '30',
    currency: 'USD',
    merchantId: 'merchant-a',
    signingKeyPem: m.authority.publicKeyPem,
    offline: true,
    now: fixedNow,
  });
  const bundleChain = withFreshLedger({
    amount: '30',
    currency: 'USD',
    merchantId: 'merchant-a',
    trustBundles: [m.bundle],
    rootPublicKeyPem: m.root.publicKeyPem,
    offline: true,
    now: fixedNow,
  });

  test(`${backend}: any single-byte change of a signed SBA (grant inside) → invalid (${runs(600)} runs)`, async () => {
    const text = JSON.stringify(m.sba);
    if (!(await verifyCtl(text, ctlOptions)).valid) throw new Error('the unmutated SBA must verify');
    await mutationProperty(text, (t) => verifyCtl(t, ctlOptions), runs(600));
  });

  test(
    `${backend}: any single-byte change of a signed Trust Bundle → invalid, alone and ` +
      `as the chain's key source (${runs(400)} + ${runs(200)} runs)`,
    async () => {
      const text = JSON.stringify(m.bundle);
      if (!(await verifyBundleWith(c, text, m.root.publicKeyPem, { now: fixedNow })).valid)
        throw new Error('the unmutated bundle must verify');
      if (!(await verifyCtl(m.sba, bundleChain)).valid) throw new Error('the unmutated chain must verify');
      await mutationProperty(text, (t) => verifyBundleWith(c, t, m.root.publicKeyPem, { now: fixedNow }), runs(400));
      // A mutated bundle can never vouch for the grant: a fresh verifier each time (no cache).
      await mutationProperty(text, (t) => createVerifier(c)(m.sba, { ...bundleChain, trustBundles: [t] }), runs(200));
    },
  );

  test(`${backend}: any single-byte change of a signed receipt → invalid (${runs(400)} runs)`, async () => {
    const text = JSON.stringify(m.receipt);
    if (!(await verifyReceiptWith(c, text, { publicKey: m.gateway.publicKeyPem })).valid)
      throw new Error('the unmutated receipt must verify');
    await mutationProperty(text, (t) => verifyReceiptWith(c, t, { publicKey: m.gateway.publicKeyPem }), runs(400));
  });
}

test.run();
