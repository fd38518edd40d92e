/**
 * The device tooling through the real `ctl` binary (bin/ctl.mjs → build/cli/*.js): keygen, root
 * init, bundle verify, verify --explain (each step of spec §4.4 with ✓/✗), and the bundle
 * refresh job against a local authority stand-in on 127.0.0.1.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer, type Server } from 'node:http';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as CTL from '../../src/index.js';
import { makeFleet, iso, T0, HOUR } from '../offline/fleet.js';
import { runCtl } from '../helpers/run-ctl.js';

const dir = mkdtempSync(join(tmpdir(), 'ctl-cli-'));
const f = (name: string) => join(dir, name);

const ctl = (...args: string[]) => runCtl({ cwd: dir }, ...args);

const fleet = await makeFleet(CTL, { offline: { maxPayments: 5 } });
writeFileSync(f('root.pub.pem'), fleet.root.publicKeyPem);
writeFileSync(f('authority.pub.pem'), fleet.authority.publicKeyPem);
writeFileSync(f('bundle.json'), JSON.stringify(await fleet.bundle(3)));
writeFileSync(f('sba.json'), JSON.stringify(await fleet.sba('1200')));
const now = ['--now', iso(T0)];

test('ctl keygen writes a usable key pair, private half 0600, and refuses to overwrite', async () => {
  const r = await ctl('keygen', '--alg', 'ES256', '--out', f('wallet'));
  assert.is(r.code, 0, r.err);
  const info = JSON.parse(r.out);
  assert.is(info.alg, 'ES256');
  assert.is(info.kid, await CTL.jwkThumbprint(info.publicJwk));
  assert.is(statSync(f('wallet.key.pem')).mode & 0o777, 0o600);
  const key = await CTL.importSigningKey(readFileSync(f('wallet.key.pem'), 'utf8'));
  assert.equal(key.publicJwk, info.publicJwk);
  assert.is((await ctl('keygen', '--out', f('wallet'))).code, 1);
  assert.is((await ctl('keygen', '--alg', 'RSA')).code, 2);
  assert.is((await ctl('keygen', '--bogus')).code, 2);
});

test('ctl root init: PEM for manufacture, never replaced without --force', async () => {
  const r = await ctl('root', 'init', '--out', f('fleet-root'));
  assert.is(r.code, 0, r.err);
  assert.match(readFileSync(f('fleet-root/root.pub.pem'), 'utf8'), /BEGIN PUBLIC KEY/);
  assert.is(statSync(f('fleet-root/root.key.pem')).mode & 0o777, 0o600);
  const meta = JSON.parse(readFileSync(f('fleet-root/root.json'), 'utf8'));
  assert.ok(r.out.includes(meta.kid));
  const again = await ctl('root', 'init', '--out', f('fleet-root'));
  assert.is(again.code, 1);
  assert.match(again.err, /--force/);
  const shown = await ctl('root', 'show', '--out', f('fleet-root'));
  assert.ok(shown.out.includes(readFileSync(f('fleet-root/root.pub.pem'), 'utf8').trim()));
  // The root signs a bundle that `ctl bundle verify` accepts with the exported PEM.
  const b = await CTL.createTrustBundle(
    { sequence: 1, scope: {}, issuers: [], revokedGrants: [], expiresAt: iso(Date.now() + HOUR) },
    { signingKey: readFileSync(f('fleet-root/root.key.pem'), 'utf8'), issuer: 'fleet' },
  );
  writeFileSync(f('fleet-bundle.json'), JSON.stringify(b));
  assert.is((await ctl('bundle', 'verify', f('fleet-bundle.json'), '--root', f('fleet-root/root.pub.pem'))).code, 0);
});

test('ctl bundle verify: ✓ with details, ✗ with the reason (wrong root, rollback, expired)', async () => {
  const ok = await ctl('bundle', 'verify', f('bundle.json'), '--root', f('root.pub.pem'), ...now);
  assert.is(ok.code, 0, ok.out + ok.err);
  assert.match(ok.out, /^✓ .*sequence 3/);
  assert.match(ok.out, /trusts authority\.fleet\.example/);
  const wrong = await ctl('bundle', 'verify', f('bundle.json'), '--root', f('authority.pub.pem'), ...now);
  assert.is(wrong.code, 1);
  assert.match(wrong.out, /^✗ .*trust_bundle_invalid/);
  const rollback = await ctl(
    'bundle',
    'verify',
    f('bundle.json'),
    '--root',
    f('root.pub.pem'),
    '--min-sequence',
    '4',
    ...now,
  );
  assert.match(rollback.out, /✗ .*trust_bundle_rollback/);
  const expired = await ctl(
    'bundle',
    'verify',
    f('bundle.json'),
    '--root',
    f('root.pub.pem'),
    '--now',
    iso(T0 + 48 * HOUR),
  );
  assert.match(expired.out, /✗ .*trust_bundle_expired/);
});

const steps = (out: string) =>
  out
    .split('\n')
    .filter((l) => /^[✓✗–] /.test(l))
    .map((l) => l[0])
    .join('');

test('ctl verify --explain: every step ✓ for a valid SBA', async () => {
  const r = await ctl(
    'verify',
    f('sba.json'),
    '--bundle',
    f('bundle.json'),
    '--root',
    f('root.pub.pem'),
    '--explain',
    ...now,
  );
  assert.is(r.code, 0, r.out + r.err);
  assert.is(steps(r.out), '✓✓✓✓✓✓');
  assert.match(r.out, /grant signed by key .* trusted through 1 bundle/);
  // Money shown as money: 1200 minor units of EUR are 12.00 EUR (ISO 4217 exponent 2).
  assert.match(r.out, /12\.00 EUR ≤ 12\.00 EUR authorized \(grant ceiling \d+\.\d\d EUR\)/);
  assert.match(r.out, /^VALID: 12\.00 EUR under grant/m);
});

test('ctl verify --explain: the failing step is ✗ with its code, later steps not reached', async () => {
  const cases: Array<[string, string[], string, string]> = [
    ['amount', ['--amount', '1300'], '✓✓✓✓✗–', 'amount_exceeds_authorization'],
    ['merchant', ['--merchant', 'not-listed'], '✓✓✓✓✓✓', ''], // the fleet grant has no allowlist: unrestricted
    ['currency', ['--currency', 'USD'], '✓✓✓✓✗–', 'currency_mismatch'],
    ['expired bundle', ['--now', iso(T0 + 48 * HOUR)], '✓✗––––', 'trust_bundle_expired'],
  ];
  for (const [name, extra, expected, code] of cases) {
    const r = await ctl(
      'verify',
      f('sba.json'),
      '--bundle',
      f('bundle.json'),
      '--root',
      f('root.pub.pem'),
      '--explain',
      ...now,
      ...extra,
    );
    assert.is(steps(r.out), expected, `${name}:\n${r.out}${r.err}`);
    if (code) {
      assert.is(r.code, 1, name);
      assert.match(r.out, new RegExp(`✗ .*\\n    ${code}:`), name);
    }
  }
  const sba = JSON.parse(readFileSync(f('sba.json'), 'utf8'));
  writeFileSync(
    f('tampered.json'),
    JSON.stringify({ ...sba, authorization: { ...sba.authorization, merchantId: 'm-x' } }),
  );
  const t = await ctl(
    'verify',
    f('tampered.json'),
    '--bundle',
    f('bundle.json'),
    '--root',
    f('root.pub.pem'),
    '--explain',
    ...now,
  );
  assert.is(steps(t.out), '✓✓✗–––');
  assert.match(t.out, /sba_signature_invalid/);
  writeFileSync(f('revoking.json'), JSON.stringify(await fleet.bundle(4, { revokedGrants: [fleet.grant.grantId] })));
  const rv = await ctl(
    'verify',
    f('sba.json'),
    '--bundle',
    f('revoking.json'),
    '--root',
    f('root.pub.pem'),
    '--explain',
    ...now,
  );
  assert.is(steps(rv.out), '✓✓✓✗––');
  assert.match(rv.out, /grant_revoked/);
  writeFileSync(f('garbage.json'), '{"version":1,"version":1}');
  const g = await ctl('verify', f('garbage.json'), '--signing-key', f('authority.pub.pem'), '--explain', ...now);
  assert.is(g.code, 1);
  assert.match(g.out, /^✗ parse/);
});

test('ctl verify reads an "Authorization: CTL <base64>" file and the signing-key fallback', async () => {
  writeFileSync(
    f('header.txt'),
    'Authorization: ' + CTL.encodeSbaHeader(JSON.parse(readFileSync(f('sba.json'), 'utf8'))),
  );
  const r = await ctl('verify', f('header.txt'), '--signing-key', f('authority.pub.pem'), ...now);
  assert.is(r.code, 0, r.out + r.err);
  assert.is(
    (await ctl('verify', f('sba.json'), '--bundle', f('bundle.json'), ...now)).code,
    2,
    '--bundle without --root is a usage error',
  );
});

// --- bundle refresh against a local stand-in of GET /trust-bundles ---
let served: unknown[] | 'down' = [];
const requests: string[] = [];
const server: Server = createServer((req, res) => {
  requests.push(req.url ?? '');
  if (served === 'down') {
    res.writeHead(503).end();
    return;
  }
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ bundles: served }));
});
await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
const authority = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
const scope = { category: 'ev-charging', region: 'eu' };
const refresh = (at: number, ...extra: string[]) =>
  ctl(
    'bundle',
    'refresh',
    '--authority',
    authority,
    '--category',
    scope.category,
    '--region',
    scope.region,
    '--root',
    f('root.pub.pem'),
    '--store',
    f('device'),
    '--now',
    iso(at),
    ...extra,
  );

test(
  'ctl bundle refresh: fetch, keep while fresh, refresh before expiry, never roll back, ' + 'keep the old on failure',
  async () => {
    served = 'down';
    const none = await refresh(T0);
    assert.is(none.code, 3, none.out + none.err);
    served = [await fleet.bundle(5), await fleet.bundle(9, { scope: { region: 'us' } })];
    const first = await refresh(T0);
    assert.is(first.code, 0, first.out + first.err);
    assert.match(first.out, /updated: bundle .* sequence 5/);
    assert.match(requests.at(-1)!, /category=ev-charging/);
    assert.match(requests.at(-1)!, /region=eu/);
    const count = requests.length;
    const fresh = await refresh(T0 + HOUR);
    assert.match(fresh.out, /✓ fresh: .*sequence 5/);
    assert.is(requests.length, count, 'no request while the bundle is fresh');
    // In the last quarter of its life (issued T0-1h, expires T0+23h: window from T0+17h) the job refreshes.
    served = [await fleet.bundle(4, { issuedAt: T0 + 17 * HOUR })]; // a rollback attempt
    const rolled = await refresh(T0 + 18 * HOUR);
    assert.is(rolled.code, 1, rolled.out);
    assert.match(rolled.out, /✗ refresh failed: .*trust_bundle_rollback.*kept bundle .* sequence 5/);
    served = 'down';
    const down = await refresh(T0 + 18 * HOUR);
    assert.is(down.code, 1);
    served = [await fleet.bundle(6, { issuedAt: T0 + 17 * HOUR })];
    const next = await refresh(T0 + 18 * HOUR);
    assert.is(next.code, 0, next.out);
    assert.match(next.out, /updated: .*sequence 6/);
    assert.is(JSON.parse(readFileSync(f('device/bundle.json'), 'utf8')).sequence, 6);
    assert.equal(Object.values(JSON.parse(readFileSync(f('device/floor.json'), 'utf8'))), [6]);
    // Past expiry with the authority down: no valid bundle, the device must refuse offline payments.
    served = 'down';
    const dead = await refresh(T0 + 60 * HOUR);
    assert.is(dead.code, 3);
    assert.ok(existsSync(f('device/bundle.json')), 'the old file stays (it is just no longer valid)');
  },
);

test('ctl bundle refresh: a stored bundle of another scope is neither fresh nor a rollback floor', async () => {
  const eu = ['--category', scope.category, '--region', scope.region];
  const us = ['--region', 'us'];
  const run = (at: number, args: string[], ...extra: string[]) =>
    ctl(
      'bundle',
      'refresh',
      '--authority',
      authority,
      ...args,
      '--root',
      f('root.pub.pem'),
      '--store',
      f('shared'),
      '--now',
      iso(at),
      ...extra,
    );
  served = [await fleet.bundle(9), await fleet.bundle(2, { scope: { region: 'us' } })];
  const a = await run(T0, eu);
  assert.is(a.code, 0, a.out + a.err);
  assert.match(a.out, /updated: .*sequence 9/);
  // The stored bundle is for category=ev-charging,region=eu: for region=us it is not current,
  // and its sequence 9 does not make region=us's sequence 2 a rollback.
  const b = await run(T0 + HOUR, us);
  assert.is(b.code, 0, b.out + b.err);
  assert.match(b.out, /updated: .*sequence 2/);
  assert.equal(JSON.parse(readFileSync(f('shared/bundle.json'), 'utf8')).scope, { region: 'us' });
  // Back to the first scope: replaced again (its own floor is 9, not 2), and still no rollback below 9.
  served = [await fleet.bundle(8), await fleet.bundle(2, { scope: { region: 'us' } })];
  const rolled = await run(T0 + HOUR, eu);
  assert.is(rolled.code, 3, rolled.out);
  assert.match(rolled.out, /✗ refresh failed: .*trust_bundle_rollback.*kept no valid bundle/);
  served = [await fleet.bundle(9), await fleet.bundle(1, { scope: { region: 'us' } })];
  const back = await run(T0 + HOUR, eu);
  assert.is(back.code, 0, back.out);
  assert.match(back.out, /updated: .*sequence 9/);
  assert.equal(JSON.parse(readFileSync(f('shared/floor.json'), 'utf8')), {
    [CTL.canonicalize({ category: scope.category, region: scope.region })]: 9,
    [CTL.canonicalize({ region: 'us' })]: 2,
  });
  // region=us's own floor (2) still holds against its rollback to 1.
  const usRolled = await run(T0 + HOUR, us, '--force');
  assert.is(usRolled.code, 3, usRolled.out);
  assert.match(usRolled.out, /trust_bundle_rollback/);
  const help = await ctl('bundle', '--help');
  assert.match(help.out, /one bundle per DIR.*\n.*neither fresh nor a rollback floor/i);
});

test.after(() => {
  server.close();
  rmSync(dir, { recursive: true, force: true });
});
test.run();
