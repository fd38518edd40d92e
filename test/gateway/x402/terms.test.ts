/** 402 detection, normalisation to one shape, the terms policy, the asset map. */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { detectX402, chooseRequirement } from '../../../gateway/payments/schemes/x402/terms.js';
import { parseAssetMap, parseMaxTimeoutSeconds } from '../../../gateway/payments/evm/assets.js';

const USDC = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
const PAYEE = '0x2222222222222222222222222222222222222222';
const v2req = (o: Record<string, unknown> = {}) => ({
  scheme: 'exact',
  network: 'eip155:84532',
  amount: '10000',
  asset: USDC,
  payTo: PAYEE,
  maxTimeoutSeconds: 300,
  extra: { name: 'USDC', version: '2' },
  ...o,
});
const v2 = (accepts: unknown[]) => ({
  status: 402,
  headers: {
    'payment-required': Buffer.from(
      JSON.stringify({ x402Version: 2, resource: { url: 'http://m/x' }, accepts }),
    ).toString('base64'),
  },
  body: Buffer.from('{}'),
});
const v1 = (accepts: unknown[]) => ({
  status: 402,
  headers: {},
  body: Buffer.from(JSON.stringify({ x402Version: 1, error: 'pay', accepts })),
});
const map = parseAssetMap(JSON.stringify({ USDC: [{ network: 'eip155:84532', asset: USDC }] }));
const policy = { currency: 'USDC', assets: map, maxTimeoutSeconds: 600 };
const code = (f: () => unknown) => {
  try {
    f();
    return 'none';
  } catch (e) {
    return (e as { code?: string }).code ?? String(e);
  }
};

test('v2 and v1 normalise to the same shape', () => {
  const a = detectX402(v2([v2req()]))!;
  const b = detectX402(v1([{ ...v2req(), network: 'base-sepolia', amount: undefined, maxAmountRequired: '10000' }]))!;
  assert.is(a.version, 'x402-v2');
  assert.is(b.version, 'x402-v1');
  const shape = (r: any) => ({
    scheme: r.scheme,
    network: r.network,
    asset: r.asset,
    amount: r.amount,
    payTo: r.payTo,
    maxTimeoutSeconds: r.maxTimeoutSeconds,
  });
  const expected = {
    scheme: 'exact',
    network: 'eip155:84532',
    asset: USDC.toLowerCase(),
    amount: 10000n,
    payTo: PAYEE,
    maxTimeoutSeconds: 300,
  };
  assert.equal(shape(a.requirements[0]), expected);
  assert.equal(shape(b.requirements[0]), expected);
});

test('detection: not a 402, the spec X-Payment terms, an ordinary 402 → not x402', () => {
  assert.is(detectX402({ ...v2([v2req()]), status: 200 }), undefined);
  assert.is(
    detectX402({
      status: 402,
      headers: { 'x-payment': '{"amount":"1","currency":"USD","address":"a"}' },
      body: Buffer.from('{"x402Version":1,"accepts":[]}'),
    }),
    undefined,
  );
  assert.is(detectX402({ status: 402, headers: {}, body: Buffer.from('{"error":"pay up"}') }), undefined);
  assert.is(detectX402({ status: 402, headers: {}, body: Buffer.from('not json') }), undefined);
});

test('an unreadable x402 402 is payment_terms_refused, never guessed', () => {
  assert.is(
    code(() => detectX402({ status: 402, headers: { 'payment-required': '%%%' }, body: Buffer.alloc(0) })),
    'payment_terms_refused',
  );
  assert.is(
    code(() =>
      detectX402({
        status: 402,
        headers: { 'payment-required': Buffer.from('{"x402Version":1}').toString('base64') },
        body: Buffer.alloc(0),
      }),
    ),
    'payment_terms_refused',
  );
  assert.is(
    code(() => detectX402({ status: 402, headers: {}, body: Buffer.from('{"x402Version":1,"accepts":"x"}') })),
    'payment_terms_refused',
  );
  const bad = detectX402(
    v2([
      v2req({ amount: '1.5' }),
      v2req({ amount: '0' }),
      v2req({ payTo: 'nobody' }),
      v2req({ maxTimeoutSeconds: -1 }),
    ]),
  )!;
  assert.is(bad.requirements.length, 0);
  assert.is(bad.malformed.length, 4);
  assert.is(
    code(() => chooseRequirement(bad, policy)),
    'payment_terms_refused',
  );
});

test('policy: the cheapest mapped requirement; asset_not_allowed outside the map; too long a validity refused', () => {
  const terms = detectX402(
    v2([
      v2req({ amount: '30000' }),
      v2req({ amount: '20000', asset: '0x1111111111111111111111111111111111111111' }),
      v2req({ amount: '15000' }),
    ]),
  )!;
  assert.is(chooseRequirement(terms, policy).amount, 15000n);
  assert.is(
    code(() => chooseRequirement(detectX402(v2([v2req({ network: 'eip155:8453' })]))!, policy)),
    'asset_not_allowed',
  );
  assert.is(
    code(() => chooseRequirement(detectX402(v2([v2req()]))!, { ...policy, currency: 'USD' })),
    'asset_not_allowed',
  );
  assert.is(
    code(() => chooseRequirement(detectX402(v2([v2req({ maxTimeoutSeconds: 601 })]))!, policy)),
    'payment_terms_refused',
  );
  assert.is(
    code(() => chooseRequirement(detectX402(v2([v2req({ scheme: 'upto' })]))!, policy)),
    'payment_terms_refused',
  );
  assert.is(
    code(() => chooseRequirement(detectX402(v2([v2req({ extra: { assetTransferMethod: 'permit2' } })]))!, policy)),
    'payment_terms_refused',
  );
  assert.is(
    code(() =>
      chooseRequirement(detectX402(v2([v2req({ network: 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp' })]))!, policy),
    ),
    'payment_terms_refused',
  );
});

test('CTL_X402_ASSETS and CTL_X402_MAX_TIMEOUT_SECONDS are checked at start', () => {
  assert.is(parseAssetMap(undefined).size, 0);
  assert.equal(map.get('USDC'), [{ network: 'eip155:84532', asset: USDC.toLowerCase() }]);
  for (const bad of [
    'nope',
    '[]',
    '{"usdc":[]}',
    '{"USDC":[]}',
    '{"USDC":[{"network":"base","asset":"0x036CbD53842c5426634e7929541eC2318f3dCF7e"}]}',
    '{"USDC":[{"network":"eip155:1","asset":"0x12"}]}',
    '{"USDC":[{"network":"eip155:1","asset":"0x036CbD53842c5426634e7929541eC2318f3dCF7e","x":1}]}',
  ]) {
    assert.throws(() => parseAssetMap(bad), /CTL_X402_ASSETS/, bad);
  }
  assert.is(parseMaxTimeoutSeconds(undefined), 600);
  assert.is(parseMaxTimeoutSeconds('120'), 120);
  assert.throws(() => parseMaxTimeoutSeconds('0'));
  assert.throws(() => parseMaxTimeoutSeconds('1e3'));
});

test('upto: v2 with Permit2 and the facilitator named is payable (its amount the maximum); else refused', () => {
  const facilitatorAddress = '0x5555555555555555555555555555555555555555';
  const upto = (extra: Record<string, unknown>) =>
    v2req({ scheme: 'upto', amount: '50000', extra: { name: 'USDC', version: '2', ...extra } });
  const chosen = chooseRequirement(
    detectX402(v2([upto({ assetTransferMethod: 'permit2', facilitatorAddress })]))!,
    policy,
  );
  assert.equal([chosen.scheme, chosen.amount, chosen.facilitator], ['upto', 50000n, facilitatorAddress]);
  const refused = (r: unknown) => code(() => chooseRequirement(detectX402(v2([r]))!, policy));
  assert.is(refused(upto({ assetTransferMethod: 'permit2' })), 'payment_terms_refused', 'no facilitator named');
  assert.is(refused(upto({ facilitatorAddress })), 'payment_terms_refused', 'not Permit2');
  assert.is(refused(upto({ assetTransferMethod: 'eip3009', facilitatorAddress })), 'payment_terms_refused');
  const v1upto = { ...upto({ assetTransferMethod: 'permit2', facilitatorAddress }), network: 'base-sepolia' };
  const t1 = detectX402(v1([{ ...v1upto, amount: undefined, maxAmountRequired: '50000' }]))!;
  assert.is(
    code(() => chooseRequirement(t1, policy)),
    'payment_terms_refused',
    'upto is v2 only',
  );
});

test.run();
