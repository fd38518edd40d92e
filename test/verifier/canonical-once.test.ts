/**
 * A delegation chain's canonical bytes are written once per verification (PROTOCOL.md §14): each
 * link's signature, its revocation id and the SBA's signed text read the same texts, so a chain's
 * cost grows with its depth, not with the square of it (each link's text holds every link above).
 *
 * Counted through the root grant, whose text is inside every link's: JCS sorts the keys of each
 * object it writes (RFC 8785 §3.2.3), and the root's `delegation` member is the one object of a
 * verification whose keys are exactly ['maxDepth'].
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { canonicalize, createMemorySpendStorage, verifyCtl } from '../../src/index.js';
import type { FetchLike } from '../../src/net/fetch-json.js';
import { verifyCtlEdge } from '../../src/edge.js';
import { keys, fakeAuthority, T0, type Keys } from '../helpers/fixtures.js';
import { chain, rawDelegation, sbaUnder } from '../helpers/delegation-fixtures.js';
import { linkTexts } from '../../src/artifacts/chain-text.js';

let k: Keys;
test.before(async () => {
  k = await keys();
});

let rootWrites = 0;
const sort = Array.prototype.sort;
function counting<T>(this: T[], compare?: (a: T, b: T) => number): T[] {
  if (this.length === 1 && (this[0] as unknown) === 'maxDepth') rootWrites++;
  return sort.call(this, compare) as T[];
}

/** How many times verifying `sba` writes the root grant's canonical text. */
async function writesOf(verify: typeof verifyCtl, sba: unknown, fetch: FetchLike): Promise<number> {
  rootWrites = 0;
  Array.prototype.sort = counting;
  try {
    const r = await verify(sba, {
      amount: '30',
      currency: 'USD',
      merchantId: 'merchant-a',
      now: () => T0,
      signingKeyPem: k.authority.publicKeyPem,
      fetch,
      trackSpend: true,
      spendStorage: createMemorySpendStorage(),
    });
    assert.ok(r.valid, JSON.stringify(!r.valid && r.error));
  } finally {
    Array.prototype.sort = sort;
  }
  return rootWrites;
}

for (const [name, verify] of [
  ['verifyCtl', verifyCtl],
  ['verifyCtlEdge', verifyCtlEdge],
] as const) {
  test(`${name}: the chain's texts are written once, whatever its depth (cold and warm)`, async () => {
    const { fetch } = fakeAuthority(k);
    const counts: { depth: number; cold: number; warm: number }[] = [];
    for (let depth = 1; depth <= 4; depth++) {
      const c = await chain(k, depth);
      const sba = await sbaUnder(k, c.leaf, c.holders[depth]!);
      const cold = await writesOf(verify, sba, fetch);
      const warm = await writesOf(verify, sba, fetch);
      counts.push({ depth, cold, warm });
    }
    const seen = JSON.stringify(counts);
    // Cold: the root's text once for the chain and once for its own signature; warm: the text kept
    // with the grant's checked signature. Before, each link wrote it again for each use (3 + 3·depth).
    for (const { cold, warm } of counts) {
      assert.ok(cold <= 2, seen);
      assert.ok(warm <= cold, seen);
    }
    assert.is(counts[3]!.cold, counts[0]!.cold, seen);
    assert.is(counts[3]!.warm, counts[0]!.warm, seen);
  });
}

test('the count sees a write of the root grant, and only that', async () => {
  const c = await chain(k, 2);
  rootWrites = 0;
  Array.prototype.sort = counting;
  try {
    canonicalize(c.root);
    canonicalize(c.links[1]!); // the root inside it
    canonicalize({ delegation: { maxDepth: 1, other: 2 } });
  } finally {
    Array.prototype.sort = sort;
  }
  assert.is(rootWrites, 2);
});

test('linkTexts writes each link as canonicalize does, with and without its signature', async () => {
  for (let depth = 1; depth <= 4; depth++) {
    const c = await chain(k, depth);
    const texts = linkTexts({ root: c.root, links: c.links });
    assert.is(texts.length, depth);
    c.links.forEach((link, i) => {
      const { signature: _s, ...signed } = link;
      assert.is(texts[i]!.whole, canonicalize(link));
      assert.is(texts[i]!.signed, canonicalize(signed));
    });
  }
  // Optional members absent and present: a link with windows and a destination list.
  const c = await chain(k, 1);
  const w = await rawDelegation(c.leaf, c.holders[1]!, {
    delegationId: 'dlg-w',
    windows: [{ every: 'P1D', maxAmountMinor: '10' }],
    windowsStart: c.root.issuedAt,
    destinationAllowlist: ['merchant-a'],
  });
  const texts = linkTexts({ root: c.root, links: [c.links[0]!, w] });
  assert.is(texts[1]!.whole, canonicalize(w));
});

test.run();
