/**
 * Differential (PROTOCOL.md §14): the reference chains of test/vectors/own/delegation.json, mutated
 * link by link (each mutation re-signed by the link's own signer, the links below it and the SBA
 * re-signed too, so only the rule under test decides), get the same verdict from the source on
 * Node, the built ESM bundle and the edge build; and a widening mutation is never accepted.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  base64urlEncode,
  createMemorySpendStorage,
  importSigningKey,
  parseTimestamp,
  signedBytes,
  verifyCtl,
} from '../../src/index.js';
import { verifyCtlEdge } from '../../src/edge.js';

const root = fileURLToPath(new URL('../../..', import.meta.url));
const file = JSON.parse(readFileSync(join(root, 'test', 'vectors', 'own', 'delegation.json'), 'utf8'));
type Key = { privateKeyPem: string; publicKeyPem: string; publicJwk: { x: string; y?: string } };
const keys = file.keys as Record<string, Key>;
const holderOf = (jwk: { x: string }) => Object.values(keys).find((k) => k.publicJwk.x === jwk.x)!;

async function resign(type: 'delegation' | 'sba', obj: any, key: Key) {
  const { signature: _s, ...rest } = obj;
  const signer = await importSigningKey(key.privateKeyPem);
  return { ...rest, signature: base64urlEncode(await signer.sign(signedBytes(type, rest))) };
}

/** The links of an SBA's chain, root-first, and a rebuild after changing link `i` (0-based below the root). */
function linksOf(sba: any): any[] {
  const out = [];
  for (let n = sba.grant; n.delegationId; n = n.parent) out.unshift(n);
  return out;
}
async function rebuild(sba: any, i: number, mutate: (link: any) => void): Promise<any> {
  const links = linksOf(structuredClone(sba));
  let parent = links[0].parent; // the root grant, untouched
  for (let j = 0; j < links.length; j++) {
    const link = { ...links[j], parent };
    if (j === i) mutate(link);
    parent = await resign('delegation', link, holderOf(parent.actorKey));
  }
  const leaf = parent;
  const s = { ...structuredClone(sba), grant: leaf };
  // The authorization copies the leaf's id and lists (PROTOCOL.md §14), so only the chain decides.
  s.authorization.grantId = leaf.delegationId;
  s.authorization.allowedRails = leaf.allowedRails;
  s.authorization.allowedAssets = leaf.allowedAssets;
  s.authorization.destinationAllowlist = leaf.destinationAllowlist ?? [];
  return resign('sba', s, holderOf(leaf.actorKey));
}

const WIDENING: Array<[string, (l: any) => void]> = [
  ['maxAmountMinor+1', (l) => (l.maxAmountMinor = String(BigInt(l.parent.maxAmountMinor) + 1n))],
  [
    'expiresAt+1s',
    (l) => (l.expiresAt = new Date(Date.parse(l.parent.expiresAt) + 1000).toISOString().replace('.000', '')),
  ],
  [
    'issuedAt-1s',
    (l) => (l.issuedAt = new Date(Date.parse(l.parent.issuedAt) - 1000).toISOString().replace('.000', '')),
  ],
  ['rails+ach', (l) => (l.allowedRails = [...l.allowedRails, 'ach'])],
  ['purposes+api:*', (l) => (l.allowedPurposes = [...l.allowedPurposes, 'api:*'])],
  ['purposes-dropped', (l) => delete l.allowedPurposes],
  ['destinations+z', (l) => (l.destinationAllowlist = [...l.destinationAllowlist, 'merchant-z'])],
  [
    'window+1',
    (l) => (l.windows = [{ every: 'P1D', maxAmountMinor: String(BigInt(l.parent.windows[0].maxAmountMinor) + 1n) }]),
  ],
  ['actorKey=parent', (l) => (l.actorKey = l.parent.actorKey)],
  ['id=root', (l) => (l.delegationId = 'grant-own-deleg')],
];
// Mutations that keep the whole chain narrowing (the links below each stay inside it).
const NARROWING: Array<[string, (l: any) => void]> = [
  ['maxAmountMinor-1', (l) => (l.maxAmountMinor = String(BigInt(l.maxAmountMinor) - 1n))],
  ['re-signed as is', () => undefined],
];

test('the reference chains, mutated link by link, agree across source, dist ESM and edge', async () => {
  const dist = await import(join(root, 'dist', 'index.js'));
  const builds = { source: verifyCtl, distEsm: dist.verifyCtl, edge: verifyCtlEdge } as const;
  const ref = file.cases.filter((k: any) => /valid-depth-\d$/.test(k.id));
  assert.is(ref.length, 4);
  let compared = 0;
  for (const k of ref) {
    const sba = k.input.sba;
    const n = linksOf(sba).length;
    for (let i = 0; i < n; i++) {
      for (const [name, mutate] of [...WIDENING, ...NARROWING]) {
        const mutated = await rebuild(sba, i, mutate);
        const verdicts: Record<string, string> = {};
        for (const [b, verify] of Object.entries(builds)) {
          const r = await verify(mutated, {
            amount: '30',
            currency: 'USD',
            merchantId: 'merchant-a',
            offline: true,
            now: () => parseTimestamp(k.options.now, 'now'),
            signingKeyPem: keys['authority']!.publicKeyPem,
            spendStorage: createMemorySpendStorage(),
          });
          verdicts[b] = r.valid ? 'valid' : r.error.code;
        }
        const why = `${k.id} link ${i + 1} ${name}: ${JSON.stringify(verdicts)}`;
        assert.ok(new Set(Object.values(verdicts)).size === 1, why);
        const widening = WIDENING.some(([w]) => w === name);
        assert.is(verdicts['source'], widening ? 'delegation_invalid' : 'valid', why);
        compared++;
      }
    }
  }
  assert.is(compared, (1 + 2 + 3 + 4) * (WIDENING.length + NARROWING.length));
});

test.run();
