// The value rules docs/sdk-api.md lists beyond PROTOCOL.md §1 are the SDK's, row by row: each
// refused example of the table, applied to an otherwise valid artifact, is refused by the SDK's
// verifier with the code the row states, and the function the row names exists in its file. So
// the table cannot drift from the code: a rule relaxed in the code, or a row whose example the
// SDK accepts, fails here.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  createSession,
  verifyCtl,
  verifyTrustBundle,
  signReceipt,
  verifyReceipt,
  formatTimestamp,
} from '../../src/index.js';
import { keys, grant, bundle, fakeAuthority, T0, type Keys } from '../helpers/fixtures.js';
import { repoRoot } from '../helpers/vectors.js';

interface Row {
  value: string;
  rule: string;
  code: string;
  enforcedBy: string;
  protocol: string;
  examples: [string, string][];
}

function readTable(): Row[] {
  const doc = readFileSync(join(repoRoot, 'docs', 'sdk-api.md'), 'utf8');
  const start = doc.indexOf('## Value rules beyond PROTOCOL.md §1');
  assert.ok(start >= 0, 'docs/sdk-api.md has the value-rules section');
  const lines = doc.slice(start).split('\n');
  const first = lines.findIndex((l) => l.startsWith('| value |'));
  assert.ok(first > 0, 'the section has its table');
  const rows: Row[] = [];
  for (const line of lines.slice(first + 2)) {
    if (!line.startsWith('|')) break;
    const cells = line
      .slice(1, -1)
      .split(/\s\|\s/)
      .map((c) => c.trim());
    assert.is(cells.length, 6, `six cells: ${line.slice(0, 80)}`);
    const [value, rule, code, enforcedBy, protocol, examples] = cells as [
      string,
      string,
      string,
      string,
      string,
      string,
    ];
    rows.push({
      value,
      rule,
      code: code.replace(/`/g, ''),
      enforcedBy,
      protocol,
      examples: [...examples.matchAll(/`([^`]+)` = `([^`]+)`/g)].map((m) => [m[1]!, m[2]!] as [string, string]),
    });
  }
  return rows;
}

/** A JSON value, or `N × v`: N copies of the JSON value v with `#` replaced by the index. */
function exampleValue(text: string): unknown {
  const m = /^(\d+) × (.+)$/.exec(text);
  if (!m) return JSON.parse(text);
  return Array.from({ length: Number(m[1]) }, (_, i) => JSON.parse(m[2]!.replace(/#/g, String(i))));
}

/** Sets `a.b[0].c` in a copy of `root` (the path's first segment names the artifact). */
function withValue(root: unknown, path: string[], value: unknown): unknown {
  const copy = structuredClone(root) as Record<string, unknown>;
  let at: any = copy;
  for (const seg of path.slice(0, -1)) {
    assert.ok(at[seg] !== undefined && typeof at[seg] === 'object', `the fixture has ${path.join('.')}`);
    at = at[seg];
  }
  at[path[path.length - 1]!] = value;
  return copy;
}

const segments = (path: string) => path.split('.').flatMap((p) => p.split(/\[(\d+)\]/).filter((s) => s !== ''));

let k: Keys;
const artifacts: Record<
  string,
  { value: unknown; verify: (v: unknown) => Promise<{ valid: boolean; error?: { code: string; message: string } }> }
> = {};

test.before(async () => {
  k = await keys();
  const g = await grant(k);
  const s = createSession(g, {
    actorId: 'vehicle-42',
    signingKey: k.actor.privateKeyPem,
    fetch: fakeAuthority(k).fetch,
    now: () => T0,
  });
  const sba = await s.createSba({
    amount: '30',
    currency: 'USD',
    rail: 'x402',
    merchantId: 'merchant-a',
    purpose: 'api:search',
  });
  const receipt = await signReceipt(
    {
      receiptId: 'rcpt_1',
      sessionId: 'sess_1',
      grantId: g.grantId,
      purpose: 'api:search',
      amount: { amountMinor: '30', currency: 'USD' },
      merchant: 'merchant-a',
      paidAt: formatTimestamp(T0),
      txRef: 'txid:abc',
      rail: 'x402',
    },
    { signingKey: k.authority.privateKeyPem, keyId: 'rk-1' },
  );
  artifacts['sba'] = {
    value: sba,
    verify: (v) =>
      verifyCtl(v, {
        amount: '30',
        currency: 'USD',
        merchantId: 'merchant-a',
        offline: true,
        signingKeyPem: k.authority.publicKeyPem,
        now: () => T0,
      }),
  };
  artifacts['bundle'] = {
    value: await bundle(k),
    verify: (v) => verifyTrustBundle(v, k.root.publicKeyPem, { now: () => T0 }),
  };
  artifacts['receipt'] = { value: receipt, verify: (v) => verifyReceipt(v, { publicKey: k.authority.publicKeyPem }) };
});

test('the fixtures the examples change are valid as they are, with the times the table assumes', async () => {
  for (const [name, a] of Object.entries(artifacts)) {
    const r = await a.verify(a.value);
    assert.ok(r.valid, `${name}: ${JSON.stringify(r.error)}`);
  }
  const sba = artifacts['sba']!.value as any;
  assert.is(sba.grant.expiresAt, '2026-11-23T10:00:00Z');
  assert.is(sba.authorization.expiresAt, '2026-11-22T10:05:00Z');
  assert.is((artifacts['bundle']!.value as any).expiresAt, '2026-11-23T10:00:00Z');
});

test('every row of the value-rules table is enforced by the SDK with the stated code', async () => {
  const rows = readTable();
  assert.ok(rows.length >= 15, `the table has its rows (${rows.length})`);
  for (const row of rows) {
    const where = `row "${row.value}"`;
    assert.ok(/\*\*(stricter|absent)/.test(row.protocol), `${where}: says how it stands to PROTOCOL.md`);
    const src = /`(src\/[^`]+\.ts)` `([A-Za-z]+)`/.exec(row.enforcedBy);
    assert.ok(src, `${where}: names a source file and a function`);
    const file = join(repoRoot, src![1]!);
    assert.ok(existsSync(file), `${where}: ${src![1]} exists`);
    assert.ok(new RegExp(`\\b${src![2]}\\b`).test(readFileSync(file, 'utf8')), `${where}: ${src![2]} is in ${src![1]}`);
    assert.ok(row.examples.length > 0, `${where}: has a refused example`);
    for (const [path, text] of row.examples) {
      const [name, ...rest] = segments(path);
      const artifact = artifacts[name!];
      assert.ok(artifact, `${where}: ${path} names sba, bundle or receipt`);
      const changed = withValue(artifact!.value, rest, exampleValue(text));
      const r = await artifact!.verify(changed);
      const got = r.valid ? 'accepted' : r.error!.code;
      assert.is(
        got,
        row.code,
        `${where}: ${path} = ${text.slice(0, 60)} → ${r.valid ? 'accepted' : JSON.stringify(r.error)}`,
      );
      // The refusal names the object the example changed (a size limit names no field).
      if (!row.enforcedBy.includes('ownData')) {
        const parent = path.replace(/(\.[A-Za-z]+|\[\d+\])$/, '');
        assert.ok(r.error!.message.startsWith(parent), `${where}: ${path}: "${r.error!.message}" names ${parent}`);
      }
    }
  }
});

test.run();
