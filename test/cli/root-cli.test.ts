/**
 * Root rotation with the real `ctl` binary (PROTOCOL.md §11): `ctl root rotate` appends signed
 * statements to a chain file only when the chain verifies; `ctl bundle verify --chain` and
 * `ctl bundle refresh --chain` follow it (refresh against a local stand-in of the authority).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as CTL from '../../src/index.js';
import { iso, makeFleet, T0, HOUR } from '../offline/fleet.js';
import { runCtl } from '../helpers/run-ctl.js';

const dir = mkdtempSync(join(tmpdir(), 'ctl-root-cli-'));
const f = (name: string) => join(dir, name);

const ctl = (...args: string[]) => runCtl({ cwd: dir }, ...args);

const NAMES = ['root1', 'r2', 'a', 'b', 'c', 'bk2', 'bk3', 'bk4'] as const;
const key = (n: string) => readFileSync(f(`${n}/root.key.pem`), 'utf8');
const pub = (n: string) => readFileSync(f(`${n}/root.pub.pem`), 'utf8');
const chainOf = () => JSON.parse(readFileSync(f('chain.json'), 'utf8'));
const bundleBy = (signer: string, sequence: number) =>
  CTL.createTrustBundle(
    {
      sequence,
      scope: { region: 'eu' },
      issuers: [],
      revokedGrants: [],
      issuedAt: iso(T0 - HOUR),
      expiresAt: iso(T0 + 24 * HOUR),
    },
    { signingKey: key(signer), issuer: 'fleet.example' },
  );
let cPub = '';

test.before(async () => {
  for (const n of NAMES) assert.is((await ctl('root', 'init', '--out', f(n))).code, 0);
  // Key c's private half is elsewhere (another custodian): this machine lists it but cannot sign with it.
  cPub = pub('c');
  rmSync(f('c/root.key.pem'));
});
test.after(() => rmSync(dir, { recursive: true, force: true }));

test('ctl root rotate: 1 → 2 → 3 (2-of-3), each link verified before it is written', async () => {
  const first = await ctl('root', 'rotate', '--chain', f('chain.json'), '--from', f('root1'), '--to', f('r2'));
  assert.is(first.code, 2, 'the first rotation needs --bundle-key');
  const v2 = await ctl(
    'root',
    'rotate',
    '--chain',
    f('chain.json'),
    '--from',
    f('root1'),
    '--to',
    f('r2'),
    '--bundle-key',
    f('bk2'),
    '--now',
    iso(T0 - 48 * HOUR),
  );
  assert.is(v2.code, 0, v2.err);
  assert.match(v2.out, /root version 2 appended/);
  assert.is(chainOf().pinnedRootPem, pub('root1'));
  const v3 = await ctl(
    'root',
    'rotate',
    '--chain',
    f('chain.json'),
    '--from',
    f('r2'),
    '--to',
    f('a'),
    '--to',
    f('b'),
    '--to',
    f('c'),
    '--threshold',
    '2',
    '--bundle-key',
    f('bk3'),
    '--now',
    iso(T0 - 24 * HOUR),
  );
  assert.is(v3.code, 0, v3.err);
  assert.match(v3.out, /root keys \(2 of 3\)/);
  const chain = chainOf();
  const r = await CTL.verifyRootChain(pub('root1'), chain.statements);
  assert.ok(r.valid && r.rootVersion === 3 && r.threshold === 2, JSON.stringify(r));
  assert.is(chain.statements[1].signatures.length, 3, 'r2, a and b signed; c could not');
  assert.ok(r.valid && r.rootKeys[2]!.x === (await CTL.toPublicJwk(cPub)).x);
});

test('ctl root rotate: short of the threshold or with a foreign key, nothing is written', async () => {
  const before = readFileSync(f('chain.json'), 'utf8');
  // Version 4 needs 2 of {a, b, c}: a alone is short (bk4, the new set, is not in the old one).
  const short = await ctl(
    'root',
    'rotate',
    '--chain',
    f('chain.json'),
    '--from',
    f('a'),
    '--to',
    f('bk4'),
    '--bundle-key',
    f('bk4'),
  );
  assert.is(short.code, 1);
  assert.match(short.err, /root_rotation_invalid/);
  // The new set must prove possession: c's private half is not here, so it cannot sign.
  const noPossession = await ctl(
    'root',
    'rotate',
    '--chain',
    f('chain.json'),
    '--from',
    f('a'),
    '--from',
    f('b'),
    '--to',
    f('c'),
  );
  assert.is(noPossession.code, 1);
  assert.match(noPossession.err, /root_rotation_invalid/);
  assert.is(readFileSync(f('chain.json'), 'utf8'), before);
  assert.is(
    (await ctl('root', 'rotate', '--chain', f('chain.json'), '--from', f('a'), '--to', f('b'), '--threshold', '2'))
      .code,
    2,
  );
  assert.is((await ctl('root', 'rotate', '--chain', f('chain.json'), '--bogus')).code, 2);
  assert.match((await ctl('root', '--help')).out, /ctl root rotate --chain FILE --from DIR… --to DIR…/);
});

test(
  'ctl bundle verify --chain: the newest bundle key passes, a retired root is trust_bundle_invalid, ' +
    'an old chain root_rollback',
  async () => {
    writeFileSync(f('b3.json'), JSON.stringify(await bundleBy('bk3', 3)));
    writeFileSync(f('b1.json'), JSON.stringify(await bundleBy('root1', 4)));
    const now = ['--now', iso(T0)];
    const ok = await ctl(
      'bundle',
      'verify',
      f('b3.json'),
      '--root',
      f('root1/root.pub.pem'),
      '--chain',
      f('chain.json'),
      ...now,
    );
    assert.is(ok.code, 0, ok.out + ok.err);
    assert.match(ok.out, /bundle key .* of root version 3/);
    const retired = await ctl(
      'bundle',
      'verify',
      f('b1.json'),
      '--root',
      f('root1/root.pub.pem'),
      '--chain',
      f('chain.json'),
      ...now,
    );
    assert.is(retired.code, 1);
    assert.match(retired.out, /trust_bundle_invalid/);
    writeFileSync(f('old-chain.json'), JSON.stringify({ statements: chainOf().statements.slice(0, 1) }));
    const old = await ctl(
      'bundle',
      'verify',
      f('b3.json'),
      '--root',
      f('root1/root.pub.pem'),
      '--chain',
      f('old-chain.json'),
      '--min-root-version',
      '3',
      ...now,
    );
    assert.match(old.out, /root_rollback/);
    assert.is(
      (await ctl('bundle', 'verify', f('b3.json'), '--root', f('root1/root.pub.pem'), ...now)).code,
      1,
      'without the chain: not the pinned root',
    );
    // ctl verify --chain: an SBA whose grant key is vouched for by the version-3 bundle.
    const fleet = await makeFleet(CTL);
    const vouching = await CTL.createTrustBundle(
      {
        sequence: 5,
        scope: { region: 'eu' },
        issuers: [
          {
            issuer: fleet.issuer,
            keys: [{ ...fleet.authority.publicJwk, kid: fleet.kid, alg: 'EdDSA', purposes: ['grant'] }],
          },
        ],
        revokedGrants: [],
        issuedAt: iso(T0 - HOUR),
        expiresAt: iso(T0 + 24 * HOUR),
      },
      { signingKey: key('bk3'), issuer: 'fleet.example' },
    );
    writeFileSync(f('vouching.json'), JSON.stringify(vouching));
    writeFileSync(f('sba.json'), JSON.stringify(await fleet.sba('500')));
    const args = ['verify', f('sba.json'), '--bundle', f('vouching.json'), '--root', f('root1/root.pub.pem'), ...now];
    assert.is((await ctl(...args, '--chain', f('chain.json'))).code, 0);
    const refused = await ctl(...args);
    assert.is(refused.code, 1);
    assert.match(refused.out + refused.err, /trust_bundle_invalid/);
  },
);

test(
  'ctl bundle refresh --chain: follows the authority to version 3, then ignores a replayed ' + 'older chain',
  async () => {
    const state = { statements: chainOf().statements as unknown[], bundles: [await bundleBy('bk3', 3)] as unknown[] };
    const server = createServer((req, res) => {
      const body = req.url!.startsWith('/trust-root') ? { statements: state.statements } : { bundles: state.bundles };
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(body));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const authority = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const refresh = (...extra: string[]) =>
      ctl(
        'bundle',
        'refresh',
        '--authority',
        authority,
        '--region',
        'eu',
        '--root',
        f('root1/root.pub.pem'),
        '--store',
        f('device'),
        '--chain',
        f('device/root-chain.json'),
        '--now',
        iso(T0),
        ...extra,
      );
    try {
      const first = await refresh();
      assert.is(first.code, 0, first.out + first.err);
      assert.match(first.out, /updated: .*sequence 3.*root version 3 \(just accepted\)/);
      assert.is(JSON.parse(readFileSync(f('device/root-chain.json'), 'utf8')).statements.length, 2);
      // The authority (or someone in the middle) now serves the version-2 chain and a newer bundle of its key.
      state.statements = state.statements.slice(0, 1);
      state.bundles = [await bundleBy('bk2', 9)];
      const replay = await refresh('--force');
      assert.is(replay.code, 1, replay.out);
      assert.match(replay.out, /refresh failed: .*trust_bundle_invalid.*root chain: root_rollback/);
      assert.match(replay.out, /kept bundle \S+ sequence 3, expires \S+; root version 3$/m);
      assert.is(
        JSON.parse(readFileSync(f('device/root-chain.json'), 'utf8')).statements.length,
        2,
        'the stored chain is never shortened',
      );
      // The retired version-2 key leaks: a fork to version 4 walks from the pin but does not extend the stored chain.
      const thief = await CTL.generateKeyPair({ alg: 'EdDSA' });
      const f3 = await CTL.createRootStatement(
        { rootVersion: 3, keys: [thief.publicJwk], threshold: 1, bundleKeys: [thief.publicJwk] },
        { signers: [{ key: key('r2') }, { key: thief.privateKeyPem }] },
      );
      const f4 = await CTL.createRootStatement(
        { rootVersion: 4, keys: [thief.publicJwk], threshold: 1, bundleKeys: [thief.publicJwk] },
        { signers: [{ key: thief.privateKeyPem }] },
      );
      state.statements = [chainOf().statements[0], f3, f4];
      state.bundles = [
        await CTL.createTrustBundle(
          {
            sequence: 10,
            scope: { region: 'eu' },
            issuers: [],
            revokedGrants: [],
            issuedAt: iso(T0 - HOUR),
            expiresAt: iso(T0 + 24 * HOUR),
          },
          { signingKey: thief.privateKeyPem, issuer: 'fleet.example' },
        ),
      ];
      const fork = await refresh('--force');
      assert.is(fork.code, 1, fork.out);
      assert.match(fork.out, /root chain: root_rotation_invalid: .*a fork/);
      assert.is(JSON.parse(readFileSync(f('device/root-chain.json'), 'utf8')).statements.length, 2);
    } finally {
      server.close();
    }
  },
);

test.run();
