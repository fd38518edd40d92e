/**
 * `revocationSource` (src/revocation-source.ts): the host's source is asked about every id of the
 * chain (the root grant by its hash, each link by its revocation id) instead of the URL; answers
 * are cached for `revocationTtl`, a revocation for good; a source that throws or answers nonsense
 * is `revocation_unavailable` (fail closed); the bundles' lists still apply. The pure helpers:
 * the token id is the grant's hash, the call data is `isRevoked(bytes32)`, the result a strict bool.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { toFunctionSelector } from 'viem';
import {
  canonicalize,
  linkRevocationId,
  parseRevocationTokenResult,
  revocationTokenCallData,
  revocationTokenId,
  sha256Hex,
  utf8Encode,
  verifyCtl,
  IS_REVOKED_SELECTOR,
  type RevocationQuery,
} from '../../src/index.js';
import { keys, grant, authorityJwks, T0, type Keys } from '../helpers/fixtures.js';
import { chain, sbaUnder } from '../helpers/delegation-fixtures.js';

let k: Keys;
test.before(async () => {
  k = await keys();
});

const opts = (over: Record<string, unknown> = {}) => ({
  amount: '30',
  currency: 'USD',
  merchantId: 'merchant-a',
  jwks: authorityJwks(k),
  now: () => T0,
  // A URL check would fail: only the source may be asked.
  fetch: (async () => {
    throw new Error('the revocation URL was asked');
  }) as typeof fetch,
  ...over,
});

test('helpers: token id is the grant hash (a link: its revocation id), call data, strict result', async () => {
  const g = await grant(k);
  const { signature: _s, ...unsigned } = g;
  assert.is(revocationTokenId(g), await sha256Hex(utf8Encode(canonicalize(unsigned))));
  const c = await chain(k, 2);
  assert.is(revocationTokenId(c.links[1]!), linkRevocationId(c.links[1]!));
  assert.is(IS_REVOKED_SELECTOR, toFunctionSelector('isRevoked(bytes32)'));
  const id = revocationTokenId(g);
  assert.is(revocationTokenCallData(id), `${IS_REVOKED_SELECTOR}${id}`);
  assert.throws(() => revocationTokenCallData('ABC'), /64 lowercase hex/);
  assert.is(parseRevocationTokenResult(`0x${'0'.repeat(63)}1`), true);
  assert.is(parseRevocationTokenResult(`0x${'0'.repeat(64)}`), false);
  for (const bad of ['0x', `0x${'0'.repeat(63)}2`, `0x${'0'.repeat(66)}`, 1, null])
    assert.throws(
      () => parseRevocationTokenResult(bad),
      (e: { code?: string }) => e.code === 'revocation_unavailable',
    );
});

test('every id of a chain is asked, root by its hash first; a revoked link refuses', async () => {
  const c = await chain(k, 2);
  const sba = await sbaUnder(k, c.leaf, c.holders[2]!);
  const asked: RevocationQuery[] = [];
  const revoked = new Set([linkRevocationId(c.links[0]!)]);
  const r = await verifyCtl(
    sba,
    opts({ revocationSource: (q: RevocationQuery) => (asked.push(q), { revoked: revoked.has(q.tokenId) }) }),
  );
  assert.equal(
    asked.map((q) => [q.kind, q.tokenId]),
    [
      ['grant', revocationTokenId(c.root)],
      ['delegation', linkRevocationId(c.links[0]!)],
    ],
  );
  assert.is(r.valid, false);
  assert.is(!r.valid && r.error.code, 'grant_revoked');
  assert.match(!r.valid ? r.error.message : '', /delegation dlg-1 is revoked \(revocation source\)/);
});

test('answers are cached for revocationTtl, a revocation for good; a failing source fails closed', async () => {
  const g = await grant(k);
  const sba = await sbaUnder(k, g, k.actor);
  let calls = 0;
  let state: 'ok' | 'revoked' | 'down' | 'nonsense' = 'ok';
  const source = () => {
    calls++;
    if (state === 'down') throw new Error('node unreachable');
    if (state === 'nonsense') return { revoked: 'yes' } as never;
    return { revoked: state === 'revoked' };
  };
  let now = T0;
  // One verifier (its own caches), as a merchant process keeps.
  const { createVerifier } = await import('../../src/verifier/verify.js');
  const { defaultCrypto } = await import('../../src/crypto/index.js');
  const v = createVerifier(defaultCrypto);
  const check = () => v(sba, opts({ revocationSource: source, revocationTtl: 10_000, now: () => now }));
  assert.ok((await check()).valid);
  assert.ok((await check()).valid);
  assert.is(calls, 1, 'cached');
  state = 'down';
  now += 10_001;
  const down = await check();
  assert.is(!down.valid && down.error.code, 'revocation_unavailable');
  state = 'nonsense';
  const nonsense = await check();
  assert.is(!nonsense.valid && nonsense.error.code, 'revocation_unavailable');
  state = 'revoked';
  const r = await check();
  assert.is(!r.valid && r.error.code, 'grant_revoked');
  state = 'ok';
  now += 20_000;
  const still = await check();
  assert.is(!still.valid && still.error.code, 'grant_revoked', 'nothing un-revokes');
  const bad = await v(sba, opts({ revocationSource: 'https://x' }));
  assert.is(!bad.valid && bad.error.code, 'malformed');
});

test.run();
