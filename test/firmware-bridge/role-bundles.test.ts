/**
 * Devices on the role bundles (docs/sdk-api.md): a terminal in QuickJS runs
 * dist/ctl-verify.iife.js alone, a vehicle dist/ctl-wallet.iife.js alone. Each answers its own
 * ops byte-identically to the same device code on Node over the matching src/ entry, refuses the
 * other role's ops with `unknown_op`, and reports its roles in `status`. P-256 in QuickJS only
 * when the host registers dist/ctl-p256.iife.js.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as CTL from '../../src/index.js';
import * as Verify from '../../src/entries/verify.js';
import * as Wallet from '../../src/entries/wallet.js';
import { cborDecode, cborEncode } from '../../src/encoding/cbor.js';
import { createDevice } from '../../firmware-bridge/device.js';
import { handlePayload } from '../../firmware-bridge/protocol.js';
import { createNodeAbi } from '../../firmware-bridge/node/test-abi.js';
import { createQuickJsDevice } from '../../firmware-bridge/node/quickjs-device.js';
import { makeFleet, T0 } from '../offline/fleet.js';

type Dev = Awaited<ReturnType<typeof createQuickJsDevice>>;
const call = (dev: Dev, op: string, args: Record<string, unknown> = {}) =>
  cborDecode(dev.request(cborEncode({ id: 1, op, args }))) as any;

test('terminal on the verifier bundle: the same bytes as on Node, wallet ops are unknown_op', async () => {
  const fleet = await makeFleet(CTL, { offline: { maxPayments: 2 } });
  const qjs = await createQuickJsDevice(createNodeAbi({ now: T0 }), { bundle: 'verify' });
  const node = createDevice(Verify, createNodeAbi({ now: T0 }));
  try {
    const sba = await fleet.sba('300');
    const requests: Array<[string, Record<string, unknown>]> = [
      ['provisionRoot', { rootPublicKeyPem: fleet.root.publicKeyPem }],
      ['installBundle', { bundle: await fleet.bundle(1) }],
      ['verify', { sba, amount: '300', currency: 'EUR' }],
      ['verify', { sba, amount: '300', currency: 'EUR' }],
      ['provisionWallet', { actorId: 'vehicle-42' }],
      ['createSba', { amount: '1', currency: 'EUR', rail: 'card' }],
      ['status', { grantId: fleet.grant.grantId }],
    ];
    const codes: string[] = [];
    for (const [i, [op, args]] of requests.entries()) {
      const payload = cborEncode({ id: i, op, args });
      const a = qjs.request(payload);
      const b = await handlePayload(node, payload);
      assert.ok(a.length === b.length && a.every((x, j) => x === b[j]), `${op} #${i}: bytes differ`);
      const r = cborDecode(a) as any;
      codes.push(r.ok ? (r.result.valid === false ? r.result.error.code : 'ok') : r.error.code);
    }
    assert.equal(codes, ['ok', 'ok', 'ok', 'replay', 'unknown_op', 'unknown_op', 'ok']);
    assert.equal(call(qjs, 'status').result.roles, ['verify']);
    assert.is(qjs.engine.evalSync('typeof CTL.createSession'), 'undefined');
  } finally {
    qjs.dispose();
  }
});

test(
  'vehicle on the wallet bundle: signs offline under its grant (verified on Node), verify ' + 'is unknown_op',
  async () => {
    const fleet = await makeFleet(CTL);
    const qjs = await createQuickJsDevice(createNodeAbi({ now: T0 }), { bundle: 'wallet' });
    try {
      assert.ok(call(qjs, 'provisionRoot', { rootPublicKeyPem: fleet.root.publicKeyPem }).ok);
      assert.ok(
        call(qjs, 'installBundle', { bundle: await fleet.bundle(1) }).ok,
        'the wallet bundle checks bundles (its offline revocation source)',
      );
      const { publicJwk } = call(qjs, 'provisionWallet', { actorId: 'vehicle-42' }).result;
      const grant = await CTL.createSignedPolicyGrant(
        {
          policyHash: 'b'.repeat(64),
          actorKey: publicJwk,
          allowedRails: ['card'],
          allowedAssets: [{ standard: 'iso4217', code: 'EUR' }],
          maxAmountMinor: '5000',
          currency: 'EUR',
          issuedAt: '2026-11-22T08:00:00Z',
          expiresAt: '2026-12-22T08:00:00Z',
        },
        {
          issuer: fleet.issuer,
          keyId: fleet.kid,
          signingKey: fleet.authority.privateKeyPem,
          revocationBaseUrl: 'https://authority.fleet.example',
        },
      );
      assert.ok(call(qjs, 'installGrant', { grant }).ok);
      const signed = call(qjs, 'createSba', { amount: '1200', currency: 'EUR', rail: 'card' });
      assert.ok(signed.ok, JSON.stringify(signed));
      const r = await CTL.verifyCtl(signed.result, {
        amount: '1200',
        currency: 'EUR',
        offline: true,
        now: () => T0,
        trustBundles: [await fleet.bundle(1)],
        rootPublicKeyPem: fleet.root.publicKeyPem,
      });
      assert.ok(r.valid, JSON.stringify(r));
      const v = call(qjs, 'verify', { sba: signed.result, amount: '1200', currency: 'EUR' });
      assert.is(v.error?.code, 'unknown_op');
      assert.equal(call(qjs, 'status').result.roles, ['wallet']);
      assert.is(qjs.engine.evalSync('typeof CTL.verifyCtl'), 'undefined');
    } finally {
      qjs.dispose();
    }
  },
);

test('QuickJS terminal with a P-256 grant key: unsupported_algorithm until the host registers ctl-p256', async () => {
  const root = await CTL.generateKeyPair({ alg: 'EdDSA' });
  const authority = await CTL.generateKeyPair({ alg: 'ES256' });
  const wallet = await CTL.generateKeyPair({ alg: 'EdDSA' });
  const kid = await CTL.jwkThumbprint(authority.publicJwk);
  const bundle = await CTL.createTrustBundle(
    {
      sequence: 1,
      scope: {},
      revokedGrants: [],
      issuedAt: '2026-11-22T00:00:00Z',
      expiresAt: '2026-11-24T00:00:00Z',
      issuers: [{ issuer: 'a.example', keys: [{ ...authority.publicJwk, kid, alg: 'ES256', purposes: ['grant'] }] }],
    },
    { signingKey: root.privateKeyPem, issuer: 'root.example' },
  );
  const grant = await CTL.createSignedPolicyGrant(
    {
      policyHash: 'c'.repeat(64),
      actorKey: wallet.publicJwk,
      allowedRails: ['card'],
      allowedAssets: [{ standard: 'iso4217', code: 'EUR' }],
      maxAmountMinor: '5000',
      currency: 'EUR',
      issuedAt: '2026-11-22T08:00:00Z',
      expiresAt: '2026-11-23T08:00:00Z',
    },
    { issuer: 'a.example', keyId: kid, signingKey: authority.privateKeyPem, revocationBaseUrl: 'https://a.example' },
  );
  const sba = await CTL.createSignedSessionBudgetAuthorization(
    {
      grant,
      sessionId: 's1',
      actorId: 'v',
      maxAmountMinor: '100',
      issuedAt: '2026-11-22T09:00:00Z',
      expiresAt: '2026-11-22T11:00:00Z',
    },
    { signingKey: wallet.privateKeyPem, keyId: 'w' },
  );
  const outcome = async (p256: boolean) => {
    const dev = await createQuickJsDevice(createNodeAbi({ now: T0 }), { bundle: 'verify', p256 });
    try {
      assert.ok(call(dev, 'provisionRoot', { rootPublicKeyPem: root.publicKeyPem }).ok);
      assert.ok(call(dev, 'installBundle', { bundle }).ok);
      const r = call(dev, 'verify', { sba, amount: '100', currency: 'EUR' }).result;
      return r.valid ? 'valid' : r.error.code;
    } finally {
      dev.dispose();
    }
  };
  assert.is(await outcome(false), 'unsupported_algorithm');
  assert.is(await outcome(true), 'valid');
});

test(
  "QuickJS terminal meeting a grant issued by a person's did:key: unsupported_feature " +
    'until it loads ctl-human-agent',
  async () => {
    // PROTOCOL.md §10 through the terminal's bundle: the root lists the person's DID as an issuer, with the DID's key.
    const root = await CTL.generateKeyPair({ alg: 'EdDSA' });
    const person = await CTL.generateKeyPair({ alg: 'EdDSA' });
    const agent = await CTL.generateKeyPair({ alg: 'EdDSA' });
    const did = CTL.didKeyFromJwk(person.publicJwk);
    const bundle = await CTL.createTrustBundle(
      {
        sequence: 1,
        scope: {},
        revokedGrants: [],
        issuedAt: '2026-11-22T00:00:00Z',
        expiresAt: '2026-11-24T00:00:00Z',
        issuers: [
          { issuer: did, keys: [{ ...person.publicJwk, kid: CTL.didKeyUrl(did), alg: 'EdDSA', purposes: ['grant'] }] },
        ],
      },
      { signingKey: root.privateKeyPem, issuer: 'root.example' },
    );
    const grant = await CTL.createSignedPolicyGrant(
      {
        profile: 'human-agent',
        policyHash: 'd'.repeat(64),
        actorKey: agent.publicJwk,
        allowedRails: ['card'],
        allowedAssets: [{ standard: 'iso4217', code: 'EUR' }],
        maxAmountMinor: '5000',
        currency: 'EUR',
        issuedAt: '2026-11-22T08:00:00Z',
        expiresAt: '2026-11-23T08:00:00Z',
      },
      { signingKey: person.privateKeyPem, revocationBaseUrl: 'https://a.example' },
    );
    const intentHash = await CTL.computeIntentHash({
      amount: '100',
      currency: 'EUR',
      merchantId: 'charger-1',
      rail: 'card',
    });
    const sba = await CTL.createSignedSessionBudgetAuthorization(
      {
        grant,
        sessionId: 's1',
        actorId: 'assistant',
        maxAmountMinor: '100',
        merchantId: 'charger-1',
        rail: 'card',
        intentHash,
        issuedAt: '2026-11-22T09:00:00Z',
        expiresAt: '2026-11-22T11:00:00Z',
      } as never,
      { signingKey: agent.privateKeyPem, keyId: 'a' },
    );
    const outcome = async (humanAgent: boolean) => {
      const dev = await createQuickJsDevice(createNodeAbi({ now: T0 }), { bundle: 'verify', humanAgent });
      try {
        assert.ok(call(dev, 'provisionRoot', { rootPublicKeyPem: root.publicKeyPem }).ok);
        assert.ok(call(dev, 'installBundle', { bundle }).ok);
        const r = call(dev, 'verify', {
          sba,
          amount: '100',
          currency: 'EUR',
          merchantId: 'charger-1',
          rail: 'card',
        }).result;
        return r.valid ? 'valid' : r.error.code;
      } finally {
        dev.dispose();
      }
    };
    assert.is(await outcome(false), 'unsupported_feature');
    assert.is(await outcome(true), 'valid');
  },
);

test.run();
