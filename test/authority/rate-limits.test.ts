/**
 * Rate limits of the authority: per API key on authenticated routes (one budget for every
 * instance on a PostgreSQL database), per client address on every request, the only limit of
 * public routes such as GET /revoke (per instance, in memory), probes never; 429 `rate_limited` with `Retry-After`; `0`
 * disables.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ADMIN_KEY, startTestAuthority, type TestAuthority } from './harness.js';
import { PG_URL, dropSchema, freshSchema, pgAvailable } from '../service-kit/pg-fixture.js';
import { authorityRateLimitsFromEnv } from '../../service-kit/service-limits.js';
import { readAuthorityConfig } from '../../authority/config.js';

// The key tests turn the address limit off (every request here comes from 127.0.0.1).
const KEY_LIMITS = { CTL_AUTHORITY_RATE_LIMIT_KEY: '5/60s', CTL_AUTHORITY_RATE_LIMIT_ADDRESS: '0' };
const LIMITS = { CTL_AUTHORITY_RATE_LIMIT_KEY: '5/60s', CTL_AUTHORITY_RATE_LIMIT_ADDRESS: '8/60s' };

function assertLimited(r: { status: number; body: any; headers: Headers }, what: RegExp) {
  assert.is(r.status, 429, JSON.stringify(r.body));
  assert.is(r.body.error.code, 'rate_limited');
  assert.match(r.body.error.message, what);
  const retry = r.headers.get('retry-after');
  assert.ok(retry !== null && /^[1-9][0-9]*$/.test(retry) && Number(retry) <= 60, `Retry-After: ${retry}`);
}

/** A key with `scopes`, made by the admin key (spends one of its points). */
async function newKey(t: TestAuthority, scopes: string[]): Promise<string> {
  const r = await t.call('POST', '/admin/keys', { scopes, label: 'rate test' });
  assert.is(r.status, 201, JSON.stringify(r.body));
  return r.body.apiKey;
}

function suite(name: string, databaseUrl: () => { databaseUrl?: string; schema?: string } | undefined) {
  test(
    `${name}: each API key has its own budget; past it 429 rate_limited with Retry-After; ` +
      'a wrong key spends nothing',
    async () => {
      const db = databaseUrl();
      if (!db) return;
      const t = await startTestAuthority({ env: KEY_LIMITS, ...db });
      try {
        const revoker = await newKey(t, ['grants:revoke']);
        const other = await newKey(t, ['grants:revoke']);
        // The bootstrap admin key is never limited; a stored key with the admin scope is.
        for (let i = 0; i < 12; i++)
          assert.is((await t.call('GET', '/admin/keys')).status, 200, `bootstrap request ${i + 1}`);
        const admin = await newKey(t, ['admin']);
        for (let i = 0; i < 5; i++)
          assert.is((await t.call('GET', '/admin/keys', undefined, admin)).status, 200, `admin-scoped key ${i + 1}`);
        assertLimited(await t.call('GET', '/admin/keys', undefined, admin), /API key/);
        // The revoker's budget is untouched: five revocations of unknown grants (404), then 429.
        for (let i = 0; i < 5; i++)
          assert.is((await t.call('POST', '/revoke', { grantId: `g-${i}` }, revoker)).status, 404);
        const refused = await t.call('POST', '/revoke', { grantId: 'g-x' }, revoker);
        assertLimited(refused, /5 requests per 60 s for this API key/);
        // A key of the right shape with a wrong secret: 401, and the other key's budget stays whole.
        const forged = other.replace(/_[^_]+$/, '_' + 'A'.repeat(43));
        for (let i = 0; i < 8; i++)
          assert.is((await t.call('POST', '/revoke', { grantId: 'g-f' }, forged)).status, 401);
        for (let i = 0; i < 5; i++)
          assert.is((await t.call('POST', '/revoke', { grantId: `h-${i}` }, other)).status, 404, `other key ${i + 1}`);
        assertLimited(await t.call('POST', '/revoke', { grantId: 'h-x' }, other), /API key/);
      } finally {
        await t.close();
      }
    },
  );

  test(
    `${name}: requests (GET /revoke, JWKS, with a key or not) are limited per client address; ` + 'probes never',
    async () => {
      const db = databaseUrl();
      if (!db) return;
      const t = await startTestAuthority({ env: LIMITS, ...db });
      try {
        for (let i = 0; i < 6; i++)
          assert.is((await t.call('GET', `/revoke?grantId=g-${i}`, undefined, null)).status, 404);
        for (let i = 0; i < 2; i++)
          assert.is((await t.call('GET', '/.well-known/ctl-keys.json', undefined, null)).status, 200);
        assertLimited(await t.call('GET', '/revoke?grantId=g-0', undefined, null), /client address/);
        for (let i = 0; i < 20; i++) {
          assert.is((await t.call('GET', '/healthz', undefined, null)).status, 200);
          assert.is((await t.call('GET', '/readyz', undefined, null)).status, 200);
        }
        // A made-up Authorization header is no way around it.
        assertLimited(
          await t.call('GET', '/revoke?grantId=g-0', undefined, 'ctlk_made-up-key_' + 'A'.repeat(43)),
          /client address/,
        );
        assertLimited(await t.call('GET', '/revoke?grantId=g-0', undefined, 'anything-at-all'), /client address/);
      } finally {
        await t.close();
      }
    },
  );

  test(`${name}: 0 disables a limit`, async () => {
    const db = databaseUrl();
    if (!db) return;
    const t = await startTestAuthority({
      env: { CTL_AUTHORITY_RATE_LIMIT_KEY: '0', CTL_AUTHORITY_RATE_LIMIT_ADDRESS: '0' },
      ...db,
    });
    try {
      for (let i = 0; i < 30; i++) assert.is((await t.call('GET', '/admin/keys')).status, 200);
      for (let i = 0; i < 30; i++)
        assert.is((await t.call('GET', `/revoke?grantId=g-${i}`, undefined, null)).status, 404);
    } finally {
      await t.close();
    }
  });
}

test('the environment: defaults, N/Ss, 0 disables, a bad value names its variable', () => {
  assert.equal(authorityRateLimitsFromEnv({}), {
    key: { points: 6000, seconds: 60 },
    address: { points: 60000, seconds: 60 },
  });
  assert.equal(
    authorityRateLimitsFromEnv({ CTL_AUTHORITY_RATE_LIMIT_KEY: '10/2s', CTL_AUTHORITY_RATE_LIMIT_ADDRESS: '0' }),
    { key: { points: 10, seconds: 2 }, address: undefined },
  );
  assert.throws(
    () => authorityRateLimitsFromEnv({ CTL_AUTHORITY_RATE_LIMIT_ADDRESS: '-5' }),
    /CTL_AUTHORITY_RATE_LIMIT_ADDRESS/,
  );
  // readAuthorityConfig (and so `ctl authority` and `ctl start`) carries them.
  assert.equal(readAuthorityConfig({ CTL_AUTHORITY_RATE_LIMIT_KEY: '3/3s' }).rateLimits.key, { points: 3, seconds: 3 });
});

suite('SQLite', () => ({}));

const pgUp = await pgAvailable();
if (!pgUp) console.log(`SKIPPED authority rate limits on PostgreSQL: ${PG_URL} is unreachable`);
const schemas: string[] = [];
suite('PostgreSQL', () => {
  if (!pgUp) return undefined;
  const schema = freshSchema();
  schemas.push(schema);
  return { databaseUrl: PG_URL, schema };
});

test(
  'PostgreSQL: two authorities on one database spend one budget per API key; addresses ' + 'are counted per instance',
  async () => {
    if (!pgUp) return;
    const schema = freshSchema();
    schemas.push(schema);
    const [a, b] = await Promise.all([
      startTestAuthority({
        env: { ...LIMITS, CTL_AUTHORITY_RATE_LIMIT_ADDRESS: '20/60s' },
        databaseUrl: PG_URL,
        schema,
      }),
      startTestAuthority({
        env: { ...LIMITS, CTL_AUTHORITY_RATE_LIMIT_ADDRESS: '20/60s' },
        databaseUrl: PG_URL,
        schema,
      }),
    ]);
    try {
      const revoker = await newKey(a, ['grants:revoke']);
      for (let i = 0; i < 5; i++)
        assert.is(
          (await (i % 2 ? b : a).call('POST', '/revoke', { grantId: `g-${i}` }, revoker)).status,
          404,
          `request ${i + 1}`,
        );
      assertLimited(await a.call('POST', '/revoke', { grantId: 'g-x' }, revoker), /API key/);
      assertLimited(await b.call('POST', '/revoke', { grantId: 'g-x' }, revoker), /API key/);
      // The bootstrap key, on either instance, is never limited.
      for (let i = 0; i < 8; i++)
        assert.is((await (i % 2 ? a : b).call('GET', '/admin/keys', undefined, ADMIN_KEY)).status, 200);
      // Addresses: each instance counts its own (no database write on the revocation path). a has
      // served 9 of its 20, b 7: a runs out first, and b still answers.
      let last;
      for (
        let i = 0;
        i < 30 && (last = await a.call('GET', `/revoke?grantId=g-${i}`, undefined, null)).status === 404;
        i++
      );
      assertLimited(last!, /client address/);
      assert.is((await b.call('GET', '/revoke?grantId=g-0', undefined, null)).status, 404);
    } finally {
      await a.close();
      await b.close();
    }
  },
);

test.after(async () => {
  for (const s of schemas) await dropSchema(s);
});

test.run();
