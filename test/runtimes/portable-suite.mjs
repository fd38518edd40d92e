/**
 * The portable suite (ARCHITECTURE.md rule 10): one set of checks written as a function of the
 * library, run unchanged against the source on Node, dist/index.js on Node, Bun and Deno, and
 * dist/ctl.iife.js inside QuickJS (test/runtimes/runtimes.test.ts drives them).
 *
 *   const out = await run(CTL, report, fixtures)
 *   // report(name, ok, detail) is called once per check; out = { passed, failed, outcomes }
 *
 * Plain ES2020 with no imports and no host objects: no TextEncoder, fetch, timers, crypto or
 * process (QuickJS has none); every byte goes through the library. `fixtures` is the shared
 * vectors file (../shared/vectors/ctl/vectors.json), so the same signed SBAs are verified on
 * every target and the outcomes must agree exactly. The QuickJS driver evaluates this file as a
 * classic script with the leading `export` removed, so keep it free of imports and other exports.
 */
export async function run(CTL, report, fixtures) {
  const outcomes = [];
  let passed = 0;
  let failed = 0;
  const check = (name, ok, outcome, detail) => {
    outcomes.push([name, outcome]);
    if (ok) passed++;
    else failed++;
    report(name, ok, detail === undefined ? outcome : detail);
  };
  const attempt = async (name, f) => {
    try {
      await f();
    } catch (e) {
      check(name, false, 'threw', String(e && e.stack ? e.stack : e));
    }
  };

  // 1. Encoding and hashing, against known answers.
  await attempt('sha256 of "abc"', async () => {
    const h = await CTL.sha256Hex(CTL.utf8Encode('abc'));
    check('sha256 of "abc"', h === 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad', h);
  });
  await attempt('JCS key order and numbers', async () => {
    const s = CTL.canonicalize({ b: [1, 'é', true], a: { '10': null, '2': 1e21 }, '€': 0.5 });
    check('JCS key order and numbers', s === '{"a":{"10":null,"2":1e+21},"b":[1,"é",true],"€":0.5}', s);
  });
  await attempt('strict JSON refuses duplicate keys', async () => {
    let code = 'accepted';
    try {
      CTL.parseStrictJson('{"a":1,"a":2}');
    } catch (e) {
      code = e.code;
    }
    check('strict JSON refuses duplicate keys', code === 'malformed', code);
  });
  await attempt('base64url and UTF-8 round trip', async () => {
    const bytes = CTL.utf8Encode('CTL ✓ 𝄞');
    const back = CTL.utf8Decode(CTL.base64urlDecode(CTL.base64urlEncode(bytes)));
    check('base64url and UTF-8 round trip', back === 'CTL ✓ 𝄞' && bytes.length === 12, `${bytes.length} bytes`);
  });
  await attempt('amounts are BigInt-exact', async () => {
    const a = CTL.parseAmount('123456789012345678901234567890', 'a');
    let bad = 'accepted';
    try {
      CTL.parseAmount('01', 'a');
    } catch (e) {
      bad = e.code;
    }
    check('amounts are BigInt-exact', a === 123456789012345678901234567890n && bad === 'malformed', `${a} ${bad}`);
  });

  // 2. Every shared vector: the same signed artifacts, the same verdicts, on every target.
  const keys = fixtures.keys;
  for (const k of fixtures.cases) {
    await attempt(`vector ${k.id}`, async () => {
      const now = () => CTL.parseTimestamp(k.options.now, 'now');
      let r;
      if (k.kind === 'chain') {
        const [form, name] = k.options.trust.split(':');
        const trust = form === 'signingKeyPem'
          ? { signingKeyPem: keys[name].publicKeyPem }
          : { trustBundles: k.input.trustBundles, rootPublicKeyPem: keys[name].publicKeyPem };
        r = await CTL.verifyCtl(k.input.sba, {
          amount: k.options.amount, currency: k.options.currency, merchantId: k.options.merchantId,
          offline: true, now, spendStorage: CTL.createMemorySpendStorage(), ...trust,
        });
      } else if (k.kind === 'bundle') {
        r = await CTL.verifyTrustBundle(k.input.bundle, keys[k.options.trust.split(':')[1]].publicKeyPem, { now, minSequence: k.options.minSequence });
      } else if (k.kind === 'receipt') {
        r = await CTL.verifyReceipt(k.input.receipt, { publicKey: keys[k.options.trust.split(':')[1]].publicKeyPem });
      } else if (k.kind === 'jcs-policy-hash') {
        try {
          const doc = CTL.parseStrictJson(k.input.policyJson);
          const same = CTL.canonicalize(doc) === k.expected.jcs && CTL.policyHash(doc) === k.expected.policyHash;
          r = same ? { valid: true } : { valid: false, error: { code: 'mismatch' } };
        } catch (e) {
          r = { valid: false, error: { code: e.code || 'threw' } };
        }
      } else {
        r = { valid: false, error: { code: 'unknown kind ' + k.kind } };
      }
      const outcome = r.valid ? 'valid' : r.error.code;
      const expected = k.expected.valid ? 'valid' : k.expected.code || 'invalid';
      check(`vector ${k.id}`, r.valid === k.expected.valid && (!k.expected.code || k.expected.code === outcome), outcome, `${outcome} (expected ${expected})`);
    });
  }

  // 3. Keys made here, the whole chain signed and verified here (randomness from the host, or
  //    from the firmware ABI through setRandomSource in QuickJS).
  for (const alg of ['EdDSA', 'ES256']) {
    await attempt(`${alg}: grant → wallet → SBA → verify`, async () => {
      const authority = await CTL.generateKeyPair({ alg });
      const wallet = await CTL.generateKeyPair({ alg });
      const t0 = CTL.parseTimestamp('2026-11-22T10:00:00Z', 't0');
      const now = () => t0;
      const grant = await CTL.createSignedPolicyGrant({
        policyHash: CTL.policyHash({ p: 'portable' }), actorKey: wallet.publicJwk,
        allowedRails: ['x402'], allowedAssets: [{ standard: 'iso4217', code: 'USD' }],
        maxAmountMinor: '100', currency: 'USD', destinationAllowlist: ['m-1'],
        issuedAt: '2026-11-22T09:00:00Z', expiresAt: '2026-11-23T09:00:00Z',
      }, { issuer: 'authority.example', signingKey: authority.privateKeyPem, revocationBaseUrl: 'https://authority.example', now });
      const fetch = async (url) => ({ ok: true, status: 200, text: async () => JSON.stringify({ grantId: grant.grantId, revoked: false }) });
      const session = CTL.createSession(grant, { actorId: 'agent-1', signingKey: wallet.privateKeyPem, signingKeyId: 'w1', fetch, now });
      const sba = await session.createSba({ amount: '60', currency: 'USD', rail: 'x402', merchantId: 'm-1' });
      const options = { amount: '60', currency: 'USD', merchantId: 'm-1', signingKeyPem: authority.publicKeyPem, offline: true, now, trackSpend: true, spendStorage: CTL.createMemorySpendStorage() };
      const ok = await CTL.verifyCtl(sba, options);
      const replay = await CTL.verifyCtl(sba, options);
      const other = await CTL.verifyCtl(sba, { ...options, merchantId: 'm-2', spendStorage: CTL.createMemorySpendStorage() });
      let over = 'signed';
      try {
        await session.createSba({ amount: '41', currency: 'USD', rail: 'x402' });
      } catch (e) {
        over = `${e.name}/${e.code}`;
      }
      const left = (await session.remaining()).remainingMinor;
      const outcome = [ok.valid ? 'valid' : ok.error.code, replay.valid ? 'valid' : replay.error.code, other.valid ? 'valid' : other.error.code, over, left].join(' ');
      check(`${alg}: grant → wallet → SBA → verify`, outcome === 'valid replay destination_not_allowed CtlBudgetExceededError/budget_exceeded 40', outcome);
    });
  }

  // 4. Trust Bundles: root-signed, expiry, rollback floor.
  await attempt('trust bundle: verify, expiry, rollback', async () => {
    const root = await CTL.generateKeyPair({ alg: 'EdDSA' });
    const authority = await CTL.generateKeyPair({ alg: 'EdDSA' });
    const kid = await CTL.jwkThumbprint(authority.publicJwk);
    const bundle = await CTL.createTrustBundle({
      sequence: 4, scope: { region: 'eu' }, revokedGrants: ['g-revoked'],
      issuers: [{ issuer: 'authority.example', keys: [{ ...authority.publicJwk, kid, alg: 'EdDSA', purposes: ['grant'] }] }],
      issuedAt: '2026-11-22T00:00:00Z', expiresAt: '2026-11-23T00:00:00Z',
    }, { signingKey: root.privateKeyPem, issuer: 'root.example' });
    const at = (iso) => () => CTL.parseTimestamp(iso, 'now');
    const code = (r) => (r.valid ? 'valid' : r.error.code);
    const outcome = [
      code(await CTL.verifyTrustBundle(bundle, root.publicKeyPem, { now: at('2026-11-22T12:00:00Z'), minSequence: 4 })),
      code(await CTL.verifyTrustBundle(bundle, root.publicKeyPem, { now: at('2026-11-22T12:00:00Z'), minSequence: 5 })),
      code(await CTL.verifyTrustBundle(bundle, root.publicKeyPem, { now: at('2026-11-23T00:00:00Z') })),
      code(await CTL.verifyTrustBundle(bundle, authority.publicKeyPem, { now: at('2026-11-22T12:00:00Z') })),
    ].join(' ');
    check('trust bundle: verify, expiry, rollback', outcome === 'valid trust_bundle_rollback trust_bundle_expired trust_bundle_invalid', outcome);
  });

  // 5. The presentation header round trip.
  await attempt('Authorization: CTL header round trip', async () => {
    const k = fixtures.cases.find((c) => c.kind === 'chain' && c.expected.valid);
    const back = CTL.decodeSbaHeader(CTL.encodeSbaHeader(k.input.sba));
    check('Authorization: CTL header round trip', CTL.canonicalize(back) === CTL.canonicalize(k.input.sba), 'same');
  });

  return { passed, failed, outcomes };
}
