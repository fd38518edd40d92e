/**
 * The root chain table (store/trust-root-store.ts) on SQLite and PostgreSQL: versions in order,
 * each stored once, concurrent publishers of one version keep exactly one (PROTOCOL.md §11).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openAuthorityStore } from '../../authority/store/open.js';
import type { AuthorityStore } from '../../authority/store/types.js';
import { PG_URL, dropSchema, freshSchema, pgAvailable } from '../service-kit/pg-fixture.js';

async function conformance(open: () => Promise<AuthorityStore>, twin?: () => Promise<AuthorityStore>) {
  const store = await open();
  const other = twin ? await twin() : store;
  try {
    assert.equal(await store.listRootStatements(), []);
    assert.is(await store.appendRootStatement(3, '{"v":3}', '2026-01-02T00:00:00Z', 'admin'), true);
    assert.is(await store.appendRootStatement(2, '{"v":2}', '2026-01-01T00:00:00Z', 'admin'), true);
    assert.is(
      await other.appendRootStatement(2, '{"v":"other"}', '2026-01-03T00:00:00Z', 'key_x'),
      false,
      'a version is stored once',
    );
    const rows = await other.listRootStatements();
    assert.equal(
      rows.map((r) => [r.rootVersion, r.statement, r.publishedBy]),
      [
        [2, '{"v":2}', 'admin'],
        [3, '{"v":3}', 'admin'],
      ],
    );
    // Many publishers of one version at once: exactly one wins.
    const wins = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        (i % 2 ? other : store).appendRootStatement(4, `{"i":${i}}`, '2026-01-04T00:00:00Z', `p${i}`),
      ),
    );
    assert.is(wins.filter(Boolean).length, 1);
    assert.is((await store.listRootStatements()).length, 3);
  } finally {
    if (other !== store) await other.close();
    await store.close();
  }
}

test('SQLite', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ctl-root-store-'));
  try {
    await conformance(() => openAuthorityStore(`sqlite:${join(dir, 'a.db')}`));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('PostgreSQL, two pools on one schema', async () => {
  if (!(await pgAvailable())) return console.log(`SKIPPED PostgreSQL: ${PG_URL} is unreachable`);
  const schema = freshSchema();
  try {
    await conformance(
      () => openAuthorityStore(PG_URL, { schema }),
      () => openAuthorityStore(PG_URL, { schema }),
    );
  } finally {
    await dropSchema(schema);
  }
});

test.run();
