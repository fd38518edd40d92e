/**
 * Reading an MPP 402 (payments/schemes/mpp/terms.ts): challenges written by mppx's own serialiser,
 * what is paid (an `evm` charge), what falls to the next protocol and what is refused.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { Challenge } from 'mppx';
import { CtlError } from '../../../src/index.js';
import { detectMpp, chooseCharge, loadMpp } from '../../../gateway/payments/schemes/mpp/terms.js';

test.before(() => loadMpp());

const USDC = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
const PAYEE = '0x5555555555555555555555555555555555555555';
const ASSETS = new Map([['USDC', [{ network: 'eip155:84532', asset: USDC.toLowerCase() }]]]);
const NOW = Date.parse('2026-01-01T00:00:00Z');

function challenge(o: Partial<Challenge.Challenge> & { request?: Record<string, unknown> } = {}) {
  return Challenge.serialize(
    Challenge.from({
      id: o.id ?? 'challenge-1',
      realm: 'merchant.example',
      method: o.method ?? 'evm',
      intent: o.intent ?? 'charge',
      request: o.request ?? {
        amount: '10000',
        currency: USDC,
        methodDetails: { chainId: 84532, credentialTypes: ['authorization'], decimals: 6 },
        recipient: PAYEE,
      },
      expires: o.expires ?? new Date(NOW + 300_000).toISOString(),
      ...(o.header ? { header: o.header } : {}),
    }),
  );
}
const res402 = (headers: Record<string, string>) => ({ status: 402, headers, body: Buffer.alloc(0) });
const code = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    return e instanceof CtlError ? e.code : `not a CtlError: ${(e as Error).message}`;
  }
  return 'no error';
};

test('an evm charge is read: amount, asset, payee, network, expiry', () => {
  const t = detectMpp(res402({ 'www-authenticate': challenge() }))!;
  assert.is(t.charges.length, 1);
  const c = t.charges[0]!;
  assert.equal(
    [c.network, c.asset, c.payTo, c.amount, c.expiresAt],
    ['eip155:84532', USDC.toLowerCase(), PAYEE, 10000n, NOW + 300_000],
  );
  const chosen = chooseCharge(t, { currency: 'USDC', assets: ASSETS, maxTimeoutSeconds: 390, now: NOW });
  assert.is(chosen, c);
});

test('not MPP: no 402, no Payment scheme, or "Payment" only inside another scheme', () => {
  assert.is(detectMpp({ status: 200, headers: { 'www-authenticate': challenge() }, body: Buffer.alloc(0) }), undefined);
  assert.is(detectMpp(res402({})), undefined);
  assert.is(detectMpp(res402({ 'www-authenticate': 'Bearer realm="api"' })), undefined);
  assert.is(detectMpp(res402({ 'www-authenticate': 'Bearer error_description="a, Payment needed"' })), undefined);
});

test('an unknown method or intent is refused; beside x402 terms it is left to the x402 protocol', () => {
  const tempo = challenge({ method: 'tempo', request: { amount: '1', currency: USDC, recipient: PAYEE } });
  assert.is(
    code(() => detectMpp(res402({ 'www-authenticate': tempo }))),
    'payment_terms_refused',
  );
  assert.is(detectMpp(res402({ 'www-authenticate': tempo, 'payment-required': 'e30=' })), undefined);
  const session = challenge({ intent: 'session' });
  assert.is(
    code(() => detectMpp(res402({ 'www-authenticate': session }))),
    'payment_terms_refused',
  );
  // Several challenges: the payable one is taken, the others named.
  const both = detectMpp(res402({ 'www-authenticate': `${tempo}, ${challenge({ id: 'c2' })}` }))!;
  assert.equal(
    both.charges.map((c) => c.challenge.id),
    ['c2'],
  );
  assert.match(both.other[0]!, /^tempo\/charge/);
});

test('an unreadable Payment challenge is payment_terms_refused, never guessed', () => {
  for (const h of [
    'Payment id="x", realm="r", method="evm", intent="charge"', // no request
    'Payment id="x", realm="r", method="evm", intent="charge", request="!!!"',
    'Payment id="x", id="y", realm="r", method="evm", intent="charge", request="e30"',
    `Payment ${'a'.repeat(40_000)}`,
  ])
    assert.is(
      code(() => detectMpp(res402({ 'www-authenticate': h }))),
      'payment_terms_refused',
      h.slice(0, 60),
    );
  // Well-formed but not an evm charge request (no chainId), or a zero amount, or splits.
  const bad = [
    { amount: '1', currency: USDC, methodDetails: {}, recipient: PAYEE },
    { amount: '0', currency: USDC, methodDetails: { chainId: 84532 }, recipient: PAYEE },
    {
      amount: '1',
      currency: USDC,
      methodDetails: { chainId: 84532, splits: [{ amount: '1', recipient: PAYEE }] },
      recipient: PAYEE,
    },
  ];
  for (const request of bad)
    assert.is(
      code(() => detectMpp(res402({ 'www-authenticate': challenge({ request }) }))),
      'payment_terms_refused',
    );
  // A credential header the forwarder owns.
  assert.is(
    code(() => detectMpp(res402({ 'www-authenticate': challenge({ header: 'Host' }) }))),
    'payment_terms_refused',
  );
});

test('policy: asset map, known EIP-712 domain, validity', () => {
  const o = { currency: 'USDC', assets: ASSETS, maxTimeoutSeconds: 390, now: NOW };
  const t = (c: Parameters<typeof challenge>[0]) => detectMpp(res402({ 'www-authenticate': challenge(c) }))!;
  assert.is(
    code(() => chooseCharge(t({}), { ...o, currency: 'EUR' })),
    'asset_not_allowed',
  );
  // Mapped, but a token whose domain (name, version) mppx does not know: nothing could be signed.
  const other = '0x1111111111111111111111111111111111111111';
  const mapped = new Map([['USDC', [{ network: 'eip155:84532', asset: other }]]]);
  const request = { amount: '1', currency: other, methodDetails: { chainId: 84532 }, recipient: PAYEE };
  assert.is(
    code(() => chooseCharge(t({ request }), { ...o, assets: mapped })),
    'payment_terms_refused',
  );
  assert.is(
    code(() => chooseCharge(t({ expires: new Date(NOW + 3600_000).toISOString() }), o)),
    'payment_terms_refused',
  );
  assert.is(
    code(() => chooseCharge(t({ expires: new Date(NOW - 1000).toISOString() }), o)),
    'payment_terms_refused',
  );
  assert.is(chooseCharge(t({ expires: new Date(NOW + 390_000).toISOString() }), o).amount, 10000n);
});

test.run();
