/**
 * The portable suite (ARCHITECTURE.md rule 10): one set of checks written as a function of the
 * library, run unchanged against the source on Node, dist/index.js on Node, Bun and Deno, and
 * dist/ctl.iife.js inside QuickJS and a bare `vm` (test/runtimes/runtimes.test.ts drives them),
 * and against each role bundle (`ctl/verify`, `ctl/wallet`) on the same targets.
 *
 *   const out = await run(CTL, report, fixtures, role, humanAgent)   // role: 'full' (default), 'verify', 'wallet'
 *   // report(name, ok, detail) is called once per check; out = { passed, failed, outcomes }
 *   // humanAgent: the `ctl/human-agent` module of the same form (ESM, CJS, IIFE's CTLHumanAgent),
 *   // which the verify role registers (opt-in there, src/verifier/features.ts) after checking
 *   // that a Human-Agent grant is refused without it.
 *
 * A role runs every check its bundle is for: `verify` the shared chain and bundle vectors and a
 * terminal's accept / replay / wrong merchant; `wallet` the bundle vectors and SBA signing under
 * the vectors' grants with their actor keys (Ed25519 and P-256), checked by signature. A check
 * whose function the bundle lacks fails ('threw'), never skips.
 *
 * Plain ES2020 with no imports and no host objects: no TextEncoder, fetch, timers, crypto or
 * process (QuickJS has none); every byte goes through the library. `fixtures` is the shared
 * vectors file (../shared/vectors/ctl/vectors.json), so the same signed SBAs are verified on
 * every target and the outcomes must agree exactly. The QuickJS driver evaluates this file as a
 * classic script with the leading `export` removed, so keep it free of imports and other exports.
 */
export async function run(CTL, report, fixtures, role, humanAgent) {
  role = role || 'full';
  const verifies = role !== 'wallet';
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
    const s = CTL.canonicalize({ b: [1, 'é', true], a: { 10: null, 2: 1e21 }, '€': 0.5 });
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
  // UTF-8 is ours where the host has no TextEncoder, and every engine's decodeURIComponent is its
  // decoder: each must refuse an overlong form, a surrogate, a code point past U+10FFFF, a truncation.
  await attempt('invalid UTF-8 refused', async () => {
    const codes = [[0xc0, 0x80], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xe2, 0x82], [0x80], [0xff]].map(
      (b) => {
        try {
          CTL.utf8Decode(new Uint8Array(b));
          return 'accepted';
        } catch (e) {
          return e.code;
        }
      },
    );
    let lone = 'accepted';
    try {
      CTL.utf8Encode('a\ud800');
    } catch (e) {
      lone = e.code;
    }
    const all = codes.concat([lone]);
    check(
      'invalid UTF-8 refused',
      all.every((c) => c === 'malformed'),
      all.join(','),
    );
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
  // Which vectors a role verifies: the wallet has no merchant verifier; receipts are the agent's (full).
  const roleVerifies = (kind) =>
    kind === 'bundle' ||
    kind === 'jcs-policy-hash' ||
    (kind === 'chain' && verifies) ||
    (kind === 'receipt' && role === 'full');
  // The verifier's Human-Agent profile is opt-in (ctl/human-agent): refused without it, never passed.
  if (role === 'verify')
    await attempt('human-agent: unsupported_feature until registered, then registered', async () => {
      const k = fixtures.cases.find((c) => c.kind === 'chain' && c.expected.valid && c.options.trustedHumans);
      CTL.registerHumanAgent(undefined);
      const r = await CTL.verifyCtl(k.input.sba, {
        amount: k.options.amount,
        currency: k.options.currency,
        merchantId: k.options.merchantId,
        rail: k.options.rail,
        purpose: k.options.purpose,
        trustedHumans: k.options.trustedHumans,
        offline: true,
        now: () => CTL.parseTimestamp(k.options.now, 'now'),
        spendStorage: CTL.createMemorySpendStorage(),
      });
      CTL.registerHumanAgent(humanAgent.humanAgentProfile);
      const outcome = r.valid ? 'valid' : r.error.code;
      check(
        'human-agent: unsupported_feature until registered, then registered',
        outcome === 'unsupported_feature',
        outcome,
        outcome,
      );
    });
  // A verifier keeps every revocation a root-signed bundle showed it (PROTOCOL.md §12), and the
  // vectors share grants: the cases whose bundle revokes their own grant run last of all, so that a
  // revocation seen there does not refuse the other cases' payments under the same grant.
  const revokes = (k) =>
    k.kind === 'chain' &&
    (k.input.trustBundles || []).some(
      (b) =>
        b &&
        Array.isArray(b.revokedGrants) &&
        k.input.sba &&
        chainIds(k.input.sba.grant).some((id) => b.revokedGrants.includes(id)),
    );
  // Every id of the grant or delegation chain an SBA carries (PROTOCOL.md §14), leaf first.
  const chainIds = (g) => {
    const ids = [];
    for (let n = g, i = 0; n && typeof n === 'object' && i < 8; n = n.parent, i++)
      ids.push(n.delegationId || n.grantId);
    return ids;
  };
  const verifyVector = (k) =>
    attempt(`vector ${k.id}`, async () => {
      const now = () => CTL.parseTimestamp(k.options.now, 'now');
      let r;
      if (k.kind === 'chain') {
        const [form, name] = k.options.trust.split(':');
        const trust =
          form === 'signingKeyPem'
            ? { signingKeyPem: keys[name].publicKeyPem }
            : form === 'none'
              ? {}
              : { trustBundles: k.input.trustBundles, rootPublicKeyPem: keys[name].publicKeyPem };
        // Human-Agent cases (PROTOCOL.md §10) name the trusted DIDs and the payment's rail and purpose.
        const human = k.options.trustedHumans ? { trustedHumans: k.options.trustedHumans } : {};
        for (const f of ['rail', 'purpose', 'requireIntentHash'])
          if (k.options[f] !== undefined) human[f] = k.options[f];
        r = await CTL.verifyCtl(k.input.sba, {
          amount: k.options.amount,
          currency: k.options.currency,
          merchantId: k.options.merchantId,
          offline: true,
          now,
          spendStorage: CTL.createMemorySpendStorage(),
          ...trust,
          ...human,
        });
      } else if (k.kind === 'revocation') {
        r = await CTL.verifySignedRevocation(k.input.revocation, { now });
      } else if (k.kind === 'bundle') {
        r = await CTL.verifyTrustBundle(k.input.bundle, keys[k.options.trust.split(':')[1]].publicKeyPem, {
          now,
          minSequence: k.options.minSequence,
        });
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
      check(
        `vector ${k.id}`,
        r.valid === k.expected.valid && (!k.expected.code || k.expected.code === outcome),
        outcome,
        `${outcome} (expected ${expected})`,
      );
    });
  for (const k of fixtures.cases) if (roleVerifies(k.kind) && !revokes(k)) await verifyVector(k);

  // Delegation (PROTOCOL.md §14), signed here under the delegation vectors' root grant: a wider
  // link is refused naming the member, a narrower one signed; a session on it pays within it, and a
  // verifying build accepts its SBA.
  const delegRoot = fixtures.cases.find((c) => c.id.indexOf('delegation-') === 0 && c.expected.valid);
  if (role !== 'verify' && delegRoot)
    await attempt('delegation: sign, narrow, pay under a link', async () => {
      const now = () => CTL.parseTimestamp('2026-06-01T00:00:00Z', 'now');
      const grant = delegRoot.input.sba.grant.parent;
      const sub = await CTL.generateKeyPair();
      const fields = { actorKey: sub.publicJwk, maxAmountMinor: '6000', expiresAt: grant.expiresAt };
      const make = (over) =>
        CTL.createDelegation(grant, Object.assign({}, fields, over), {
          signingKey: keys['own-actor'].privateKeyPem,
          now,
        });
      let widened = 'signed';
      try {
        await make({});
      } catch (e) {
        widened = e.code + ':' + (String(e.message).indexOf('maxAmountMinor') >= 0);
      }
      const d = await make({ maxAmountMinor: '100' });
      const s = CTL.createSession(d, {
        actorId: 'sub',
        signingKey: sub.privateKeyPem,
        now,
        // Each id of the chain asked online, and answered "not revoked".
        fetch: async (url) => ({
          ok: true,
          status: 200,
          text: async () =>
            JSON.stringify({ grantId: decodeURIComponent(url.split('grantId=')[1].split('&')[0]), revoked: false }),
        }),
      });
      const pay = { amount: '60', currency: 'USD', rail: 'x402', merchantId: 'merchant-a', purpose: 'ev:charging' };
      const sba = await s.createSba(pay);
      let second = 'signed';
      try {
        await s.createSba(pay);
      } catch (e) {
        second = e.code;
      }
      let verified = 'no verifier';
      if (CTL.verifyCtl) {
        const r = await CTL.verifyCtl(sba, {
          amount: '60',
          currency: 'USD',
          offline: true,
          now,
          signingKeyPem: keys['own-authority'].publicKeyPem,
          spendStorage: CTL.createMemorySpendStorage(),
        });
        verified = r.valid ? 'valid' : r.error.code;
      }
      const outcome = [widened, sba.authorization.grantId === d.delegationId, second, verified].join(' ');
      const want = ['delegation_invalid:true', true, 'budget_exceeded', CTL.verifyCtl ? 'valid' : 'no verifier'];
      check('delegation: sign, narrow, pay under a link', outcome === want.join(' '), outcome);
    });

  // 3. Keys made here, the whole chain signed and verified here (randomness from the host, or
  //    from the firmware ABI through setRandomSource in QuickJS).
  for (const alg of role === 'full' ? ['EdDSA', 'ES256'] : []) {
    await attempt(`${alg}: grant → wallet → SBA → verify`, async () => {
      const authority = await CTL.generateKeyPair({ alg });
      const wallet = await CTL.generateKeyPair({ alg });
      const t0 = CTL.parseTimestamp('2026-11-22T10:00:00Z', 't0');
      const now = () => t0;
      const grant = await CTL.createSignedPolicyGrant(
        {
          policyHash: CTL.policyHash({ p: 'portable' }),
          actorKey: wallet.publicJwk,
          allowedRails: ['x402'],
          allowedAssets: [{ standard: 'iso4217', code: 'USD' }],
          maxAmountMinor: '100',
          currency: 'USD',
          destinationAllowlist: ['m-1'],
          issuedAt: '2026-11-22T09:00:00Z',
          expiresAt: '2026-11-23T09:00:00Z',
        },
        {
          issuer: 'authority.example',
          signingKey: authority.privateKeyPem,
          revocationBaseUrl: 'https://authority.example',
          now,
        },
      );
      const fetch = async (url) => ({
        ok: true,
        status: 200,
        text: async () => JSON.stringify({ grantId: grant.grantId, revoked: false }),
      });
      const session = CTL.createSession(grant, {
        actorId: 'agent-1',
        signingKey: wallet.privateKeyPem,
        signingKeyId: 'w1',
        fetch,
        now,
      });
      const sba = await session.createSba({ amount: '60', currency: 'USD', rail: 'x402', merchantId: 'm-1' });
      const options = {
        amount: '60',
        currency: 'USD',
        merchantId: 'm-1',
        signingKeyPem: authority.publicKeyPem,
        offline: true,
        now,
        trackSpend: true,
        spendStorage: CTL.createMemorySpendStorage(),
      };
      const ok = await CTL.verifyCtl(sba, options);
      const replay = await CTL.verifyCtl(sba, options);
      const other = await CTL.verifyCtl(sba, {
        ...options,
        merchantId: 'm-2',
        spendStorage: CTL.createMemorySpendStorage(),
      });
      let over = 'signed';
      try {
        await session.createSba({ amount: '41', currency: 'USD', rail: 'x402' });
      } catch (e) {
        over = `${e.name}/${e.code}`;
      }
      const left = (await session.remaining()).remainingMinor;
      const outcome = [
        ok.valid ? 'valid' : ok.error.code,
        replay.valid ? 'valid' : replay.error.code,
        other.valid ? 'valid' : other.error.code,
        over,
        left,
      ].join(' ');
      check(
        `${alg}: grant → wallet → SBA → verify`,
        outcome === 'valid replay destination_not_allowed CtlBudgetExceededError/budget_exceeded 40',
        outcome,
      );
    });
  }

  // 3a'. Budget windows and a hold (PROTOCOL.md §13, §15) on every full build: a day window of 50
  //     refuses its 51st unit with resetsAt; a hold of 30 is verified at its maximum, captured at
  //     12 (the rest released, the offline allowance counts 12), then refused a second capture.
  if (role === 'full') {
    await attempt('windows and a hold', async () => {
      const authority = await CTL.generateKeyPair({ alg: 'EdDSA' });
      const wallet = await CTL.generateKeyPair({ alg: 'EdDSA' });
      let t = CTL.parseTimestamp('2026-11-22T10:00:00Z', 't0');
      const now = () => t;
      const grant = await CTL.createSignedPolicyGrant(
        {
          policyHash: CTL.policyHash({ p: 'portable-windows' }),
          actorKey: wallet.publicJwk,
          allowedRails: ['x402'],
          allowedAssets: [{ standard: 'iso4217', code: 'USD' }],
          maxAmountMinor: '100',
          currency: 'USD',
          issuedAt: '2026-11-22T00:00:00Z',
          expiresAt: '2026-11-25T00:00:00Z',
          windows: [{ every: 'P1D', maxAmountMinor: '50' }],
          offline: { maxAmountMinor: '40' },
        },
        {
          issuer: 'authority.example',
          signingKey: authority.privateKeyPem,
          revocationBaseUrl: 'https://a.example',
          now,
        },
      );
      const fetch = async () => ({
        ok: true,
        status: 200,
        text: async () => JSON.stringify({ grantId: grant.grantId, revoked: false }),
      });
      const session = CTL.createSession(grant, { actorId: 'agent-1', signingKey: wallet.privateKeyPem, fetch, now });
      const code = async (f) => {
        try {
          await f();
          return 'ok';
        } catch (e) {
          return e.code + (e.resetsAt ? '@' + e.resetsAt : '');
        }
      };
      const hold = await session.createSba({ amount: '30', currency: 'USD', rail: 'x402', hold: true });
      const verifyOptions = (amount) => ({
        amount,
        currency: 'USD',
        signingKeyPem: authority.publicKeyPem,
        offline: true,
        now,
        spendStorage: CTL.createMemorySpendStorage(),
      });
      const options = verifyOptions('30');
      const verified = await CTL.verifyCtl(hold, options);
      // The hold lives in the verification's storage, named by its holdId (PROTOCOL.md §15).
      const where = { now, spendStorage: options.spendStorage };
      const first = await CTL.captureCtl(verified.valid ? verified.holdId : hold, '12', where);
      const second = await CTL.captureCtl(hold, '12', where);
      await session.capture(hold.authorization.budgetId, '12');
      const day = await code(() => session.createSba({ amount: '39', currency: 'USD', rail: 'x402' }));
      const left = await session.remaining();
      t += 24 * 3600 * 1000;
      const next = await code(() => session.createSba({ amount: '39', currency: 'USD', rail: 'x402' }));
      const outcome = [
        hold.authorization.capture,
        verified.valid ? 'valid' : verified.error.code,
        first.captured ? first.amountMinor : first.error.code,
        second.captured ? second.amountMinor : second.error.code,
        day,
        left.remainingMinor,
        left.windows[0].remainingMinor,
        next,
      ].join(' ');
      check(
        'windows and a hold',
        outcome === 'hold valid 12 replay window_exceeded@2026-11-23T00:00:00Z 88 38 ok',
        outcome,
      );
    });
  }

  // 3b. The terminal (verify role): the vectors' signed SBA accepted once, then replay, then the wrong merchant.
  if (role === 'verify') {
    await attempt('terminal: accept, replay, wrong merchant', async () => {
      const k = fixtures.cases.find((c) => c.id === '01-chain-valid-ed25519');
      const now = () => CTL.parseTimestamp(k.options.now, 'now');
      const options = {
        amount: k.options.amount,
        currency: k.options.currency,
        merchantId: 'merchant-a',
        signingKeyPem: keys.authority.publicKeyPem,
        offline: true,
        now,
        trackSpend: true,
        spendStorage: CTL.createMemorySpendStorage(),
      };
      const code = (r) => (r.valid ? 'valid' : r.error.code);
      const outcome = [
        code(await CTL.verifyCtl(k.input.sba, options)),
        code(await CTL.verifyCtl(k.input.sba, options)),
        code(
          await CTL.verifyCtl(k.input.sba, {
            ...options,
            merchantId: 'merchant-z',
            spendStorage: CTL.createMemorySpendStorage(),
          }),
        ),
      ].join(' ');
      check('terminal: accept, replay, wrong merchant', outcome === 'valid replay destination_not_allowed', outcome);
    });
  }

  // 3c'. The edges of PROTOCOL.md §12 on every build that verifies: a clock or a time option that is
  // not a finite number refuses (never "no check"), and offline one SBA is accepted once, with or
  // without trackSpend.
  if (verifies) {
    await attempt('time is a number or nothing', async () => {
      const k = fixtures.cases.find((c) => c.id === '01-chain-valid-ed25519');
      const now = () => CTL.parseTimestamp(k.options.now, 'now');
      const options = () => ({
        amount: k.options.amount,
        currency: k.options.currency,
        merchantId: 'merchant-a',
        signingKeyPem: keys.authority.publicKeyPem,
        offline: true,
        now,
        spendStorage: CTL.createMemorySpendStorage(),
      });
      const code = (r) => (r.valid ? 'valid' : r.error.code);
      const outcome = [
        code(await CTL.verifyCtl(k.input.sba, { ...options(), now: () => NaN })),
        code(await CTL.verifyCtl(k.input.sba, { ...options(), now: () => undefined })),
        code(await CTL.verifyCtl(k.input.sba, { ...options(), now: () => String(now()) })),
        code(await CTL.verifyCtl(k.input.sba, { ...options(), clockToleranceMs: NaN })),
        code(await CTL.verifyCtl(k.input.sba, { ...options(), clockToleranceMs: '0' })),
        code(await CTL.verifyCtl(k.input.sba, options())),
      ].join(' ');
      check(
        'time is a number or nothing',
        outcome === 'malformed malformed malformed malformed malformed valid',
        outcome,
      );
    });
    await attempt('offline: one SBA accepted once without trackSpend', async () => {
      const k = fixtures.cases.find((c) => c.id === '01-chain-valid-ed25519');
      const now = () => CTL.parseTimestamp(k.options.now, 'now');
      const options = {
        amount: k.options.amount,
        currency: k.options.currency,
        merchantId: 'merchant-a',
        signingKeyPem: keys.authority.publicKeyPem,
        offline: true,
        now,
      };
      const outcome = [];
      for (let i = 0; i < 3; i++) {
        const r = await CTL.verifyCtl(k.input.sba, options); // no trackSpend, no spendStorage
        outcome.push(r.valid ? 'valid' : r.error.code);
      }
      // The first presentation may meet an id this build's verifier saw in an earlier check (the
      // shared in-memory ledger): what matters is that at most one is ever accepted.
      const accepted = outcome.filter((o) => o === 'valid').length;
      check(
        'offline: one SBA accepted once without trackSpend',
        accepted <= 1 && outcome.slice(1).every((o) => o === 'replay'),
        outcome.join(' '),
      );
    });
  }

  // 3c. The wallet (wallet role): SBAs signed under the vectors' grants with their actor keys, checked by signature.
  for (const [id, actor] of role === 'wallet'
    ? [
        ['01-chain-valid-ed25519', 'actor'],
        ['02-chain-valid-es256-actor', 'actorP256'],
      ]
    : []) {
    await attempt(`wallet: ${actor} signs under ${id}`, async () => {
      const grant = fixtures.cases.find((c) => c.id === id).input.sba.grant;
      const now = () => CTL.parseTimestamp('2026-06-01T00:00:00Z', 'now');
      const fetch = async () => ({
        ok: true,
        status: 200,
        text: async () => JSON.stringify({ grantId: grant.grantId, revoked: false }),
      });
      const session = CTL.createSession(grant, {
        actorId: 'vehicle-42',
        signingKey: keys[actor].privateKeyPem,
        signingKeyId: 'w1',
        fetch,
        now,
        spendStorage: CTL.createMemorySpendStorage(),
      });
      const sba = await session.createSba({ amount: '3000', currency: 'USD', rail: 'card', merchantId: 'merchant-a' });
      const signed = await CTL.verifyWithJwk(
        grant.actorKey,
        CTL.signedBytes('sba', sba),
        CTL.base64urlDecode(sba.signature),
      );
      const forged = await CTL.verifyWithJwk(
        grant.actorKey,
        CTL.signedBytes('sba', { ...sba, authorization: { ...sba.authorization, maxAmountMinor: '3001' } }),
        CTL.base64urlDecode(sba.signature),
      );
      let over = 'signed';
      try {
        await session.createSba({ amount: '2001', currency: 'USD', rail: 'card' });
      } catch (e) {
        over = `${e.name}/${e.code}`;
      }
      const header = CTL.encodeSbaHeader(sba) === 'CTL ' + CTL.base64Encode(CTL.utf8Encode(CTL.canonicalize(sba)));
      const left = (await session.remaining()).remainingMinor;
      const outcome = [signed, forged, sba.grant.grantId === grant.grantId, over, left, header].join(' ');
      check(
        `wallet: ${actor} signs under ${id}`,
        outcome === 'true false true CtlBudgetExceededError/budget_exceeded 2000 true',
        outcome,
      );
    });
  }

  // 4. Trust Bundles: root-signed, expiry, rollback floor.
  if (role === 'full')
    await attempt('trust bundle: verify, expiry, rollback', async () => {
      const root = await CTL.generateKeyPair({ alg: 'EdDSA' });
      const authority = await CTL.generateKeyPair({ alg: 'EdDSA' });
      const kid = await CTL.jwkThumbprint(authority.publicJwk);
      const bundle = await CTL.createTrustBundle(
        {
          sequence: 4,
          scope: { region: 'eu' },
          revokedGrants: ['g-revoked'],
          issuers: [
            { issuer: 'authority.example', keys: [{ ...authority.publicJwk, kid, alg: 'EdDSA', purposes: ['grant'] }] },
          ],
          issuedAt: '2026-11-22T00:00:00Z',
          expiresAt: '2026-11-23T00:00:00Z',
        },
        { signingKey: root.privateKeyPem, issuer: 'root.example' },
      );
      const at = (iso) => () => CTL.parseTimestamp(iso, 'now');
      const code = (r) => (r.valid ? 'valid' : r.error.code);
      const outcome = [
        code(
          await CTL.verifyTrustBundle(bundle, root.publicKeyPem, { now: at('2026-11-22T12:00:00Z'), minSequence: 4 }),
        ),
        code(
          await CTL.verifyTrustBundle(bundle, root.publicKeyPem, { now: at('2026-11-22T12:00:00Z'), minSequence: 5 }),
        ),
        code(await CTL.verifyTrustBundle(bundle, root.publicKeyPem, { now: at('2026-11-23T00:00:00Z') })),
        code(await CTL.verifyTrustBundle(bundle, authority.publicKeyPem, { now: at('2026-11-22T12:00:00Z') })),
      ].join(' ');
      check(
        'trust bundle: verify, expiry, rollback',
        outcome === 'valid trust_bundle_rollback trust_bundle_expired trust_bundle_invalid',
        outcome,
      );
    });

  // 5. The presentation header round trip (the verifier decodes what a wallet encodes).
  if (verifies)
    await attempt('Authorization: CTL header round trip', async () => {
      const k = fixtures.cases.find((c) => c.kind === 'chain' && c.expected.valid);
      const encoded =
        role === 'full'
          ? CTL.encodeSbaHeader(k.input.sba)
          : 'CTL ' + CTL.base64Encode(CTL.utf8Encode(JSON.stringify(k.input.sba)));
      const back = CTL.decodeSbaHeader(encoded);
      check('Authorization: CTL header round trip', CTL.canonicalize(back) === CTL.canonicalize(k.input.sba), 'same');
    });

  // 6. Root rotation (PROTOCOL.md §11): 1 → 2 → 3 with a 2-of-3 set, the newest bundle key only.
  // Signing root statements is the full build's (the role bundles only verify a chain).
  if (role === 'full')
    await attempt('root rotation: chain, bundle keys, rollback', async () => {
      const k = {};
      for (const n of ['root', 'r2', 'a', 'b', 'c', 'bk2', 'bk3']) k[n] = await CTL.generateKeyPair({ alg: 'EdDSA' });
      const by = (...names) => ({
        signers: names.map((n) => ({ key: k[n].privateKeyPem })),
        now: () => CTL.parseTimestamp('2026-11-01T00:00:00Z', 'now'),
      });
      const s2 = await CTL.createRootStatement(
        { rootVersion: 2, keys: [k.r2.publicJwk], threshold: 1, bundleKeys: [k.bk2.publicJwk] },
        by('root', 'r2'),
      );
      const v3 = {
        rootVersion: 3,
        keys: [k.a.publicJwk, k.b.publicJwk, k.c.publicJwk],
        threshold: 2,
        bundleKeys: [k.bk3.publicJwk],
      };
      const s3 = await CTL.createRootStatement(v3, by('r2', 'a', 'c'));
      const s3short = await CTL.createRootStatement(v3, by('r2', 'a'));
      const bundle = (n) =>
        CTL.createTrustBundle(
          {
            sequence: 1,
            scope: {},
            issuers: [],
            revokedGrants: [],
            issuedAt: '2026-11-22T00:00:00Z',
            expiresAt: '2026-11-23T00:00:00Z',
          },
          { signingKey: k[n].privateKeyPem, issuer: 'root.example' },
        );
      const now = () => CTL.parseTimestamp('2026-11-22T12:00:00Z', 'now');
      const code = (r) => (r.valid ? `valid:${r.rootVersion}` : r.error.code);
      const pin = k.root.publicKeyPem;
      const outcome = [
        code(await CTL.verifyRootChain(pin, [s2, s3])),
        code(await CTL.verifyRootChain(pin, [s2, s3short])),
        code(await CTL.verifyRootChain(pin, [s3])),
        code(await CTL.verifyRootChain(pin, [s2], { minVersion: 3 })),
        code(await CTL.verifyTrustBundle(await bundle('bk3'), pin, { now, rootChain: [s2, s3] })),
        code(await CTL.verifyTrustBundle(await bundle('root'), pin, { now, rootChain: [s2, s3] })),
      ].join(' ');
      check(
        'root rotation: chain, bundle keys, rollback',
        outcome === 'valid:3 root_rotation_invalid root_rotation_invalid root_rollback valid:3 trust_bundle_invalid',
        outcome,
      );
    });

  for (const k of fixtures.cases) if (roleVerifies(k.kind) && revokes(k)) await verifyVector(k);
  return { passed, failed, outcomes };
}
