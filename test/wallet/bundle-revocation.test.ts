// An offline wallet signs offline (spec §3 rule 1 kept): with `revocationFromBundles` the grant's
// status comes from installed Trust Bundles verified against the pinned root, never from the
// network; a revocation in any root-signed bundle, live or expired, refuses; without a live bundle
// the wallet refuses (fail closed).
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  createSession,
  createTrustBundle,
  generateKeyPair,
  verifyCtl,
  CtlError,
  CtlGrantRevokedError,
  formatTimestamp,
} from '../../src/index.js';
import { keys, grant, bundle, authorityJwks, T0, HOUR, type Keys } from '../helpers/fixtures.js';
import { bundleBy, rotate4, rotatedRoot } from '../helpers/root-chain.js';

let k: Keys;
test.before(async () => {
  k = await keys();
});

/** A network that is not there: every request fails, and is counted. */
const offline = () => {
  const state = { calls: 0 };
  const fetch = async () => {
    state.calls++;
    throw new TypeError('fetch failed');
  };
  return { fetch, state };
};

const pay = { amount: '30', currency: 'USD', rail: 'card' };

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    return e instanceof CtlGrantRevokedError ? 'CtlGrantRevokedError' : ((e as CtlError).code ?? String(e));
  }
  return 'signed';
}

test('no network and no bundle mode: refused revocation_unavailable (what a wallet gets today)', async () => {
  const g = await grant(k);
  const net = offline();
  const s = createSession(g, {
    actorId: 'vehicle-42',
    signingKey: k.actor.privateKeyPem,
    fetch: net.fetch,
    now: () => T0,
  });
  assert.is(await codeOf(s.createSba(pay)), 'revocation_unavailable');
});

test(
  'with a live root-signed bundle the wallet signs offline, asks nothing of the network, ' + 'and the SBA verifies',
  async () => {
    const g = await grant(k);
    const net = offline();
    const b = await bundle(k);
    const s = createSession(g, {
      actorId: 'vehicle-42',
      signingKey: k.actor.privateKeyPem,
      fetch: net.fetch,
      now: () => T0,
      revocationFromBundles: { trustBundles: [b], rootPublicKeyPem: k.root.publicKeyPem },
    });
    const sba = await s.createSba(pay);
    assert.is(net.state.calls, 0);
    const r = await verifyCtl(sba, {
      amount: '30',
      currency: 'USD',
      trustBundles: [b],
      rootPublicKeyPem: k.root.publicKeyPem,
      offline: true,
      now: () => T0,
    });
    assert.ok(r.valid, JSON.stringify(r));
  },
);

test('a grant revoked in an installed bundle throws CtlGrantRevokedError, and stays refused', async () => {
  const g = await grant(k);
  const b = await bundle(k, { revokedGrants: [g.grantId] });
  const s = createSession(g, {
    actorId: 'vehicle-42',
    signingKey: k.actor.privateKeyPem,
    fetch: offline().fetch,
    now: () => T0,
    revocationFromBundles: { trustBundles: [b], rootPublicKeyPem: k.root.publicKeyPem },
  });
  assert.is(await codeOf(s.createSba(pay)), 'CtlGrantRevokedError');
  assert.equal(await s.remaining(), { remainingMinor: '5000' }, 'nothing reserved');
  // A later session given only a bundle that does not list it still refuses (revocations are permanent).
  const clean = await bundle(k, { sequence: 2 });
  const s2 = createSession(g, {
    actorId: 'vehicle-42',
    signingKey: k.actor.privateKeyPem,
    now: () => T0,
    revocationFromBundles: { trustBundles: [clean], rootPublicKeyPem: k.root.publicKeyPem },
  });
  assert.is(await codeOf(s2.createSba(pay)), 'CtlGrantRevokedError');
});

test('an expired bundle vouches for nothing, but what it revoked stays revoked', async () => {
  const g = await grant(k);
  const expiredRevoking = await bundle(k, {
    revokedGrants: [g.grantId],
    issuedAt: formatTimestamp(T0 - 3 * HOUR),
    expiresAt: formatTimestamp(T0 - HOUR),
  });
  const liveOther = await createTrustBundle(
    {
      sequence: 1,
      scope: { region: 'eu' },
      issuers: [{ issuer: 'authority.test', keys: authorityJwks(k).keys }],
      revokedGrants: [],
      issuedAt: formatTimestamp(T0 - 1000),
      expiresAt: formatTimestamp(T0 + 48 * HOUR),
    },
    { signingKey: k.root.privateKeyPem, issuer: 'root.test' },
  );
  const s = createSession(g, {
    actorId: 'vehicle-42',
    signingKey: k.actor.privateKeyPem,
    now: () => T0,
    revocationFromBundles: { trustBundles: [expiredRevoking, liveOther], rootPublicKeyPem: k.root.publicKeyPem },
  });
  assert.is(await codeOf(s.createSba(pay)), 'CtlGrantRevokedError');
});

test(
  'fail closed: no bundle, only expired bundles, or bundles not signed by the root → ' + 'revocation_unavailable',
  async () => {
    const g = await grant(k);
    const other = await generateKeyPair({ alg: 'EdDSA' });
    const forged = await createTrustBundle(
      {
        sequence: 9,
        scope: { category: 'ev-charging' },
        issuers: [],
        revokedGrants: [],
        issuedAt: formatTimestamp(T0 - 1000),
        expiresAt: formatTimestamp(T0 + HOUR),
      },
      { signingKey: other.privateKeyPem, issuer: 'root.test' },
    );
    const expired = await bundle(k, {
      issuedAt: formatTimestamp(T0 - 3 * HOUR),
      expiresAt: formatTimestamp(T0 - HOUR),
    });
    for (const [what, list] of [
      ['none', []],
      ['expired', [expired]],
      ['another root', [forged]],
      ['not a bundle', [{ hello: 1 }, 'not json']],
    ] as const) {
      const s = createSession(g, {
        actorId: 'vehicle-42',
        signingKey: k.actor.privateKeyPem,
        now: () => T0,
        revocationFromBundles: { trustBundles: list as readonly unknown[], rootPublicKeyPem: k.root.publicKeyPem },
      });
      assert.is(await codeOf(s.createSba(pay)), 'revocation_unavailable', what);
      assert.equal(await s.remaining(), { remainingMinor: '5000' }, `${what}: nothing reserved`);
    }
  },
);

test(
  'a bundle in another scope or a revocation of another grant does not refuse; bundles ' +
    'given by a function are read on every payment',
  async () => {
    const g = await grant(k);
    const installed: unknown[] = [];
    const s = createSession(g, {
      actorId: 'vehicle-42',
      signingKey: k.actor.privateKeyPem,
      now: () => T0,
      revocationTtl: 24 * HOUR, // the longest cache allowed: bundles are read anyway
      revocationFromBundles: { trustBundles: () => installed, rootPublicKeyPem: k.root.publicKeyPem },
    });
    assert.is(await codeOf(s.createSba(pay)), 'revocation_unavailable', 'nothing installed yet');
    installed.push(JSON.stringify(await bundle(k, { revokedGrants: ['grant_someone_else'] })));
    assert.is(await codeOf(s.createSba(pay)), 'signed', 'a bundle given as JSON text counts');
    installed.push(await bundle(k, { sequence: 2, revokedGrants: [g.grantId] }));
    assert.is(await codeOf(s.createSba(pay)), 'CtlGrantRevokedError', 'installed later, counted at once (no TTL)');
  },
);

test(
  'revocationFromBundles without its root key or its bundles refuses revocation_unavailable, ' + 'never signs',
  async () => {
    const g = await grant(k);
    const b = await bundle(k);
    for (const o of [
      { trustBundles: [b] },
      { rootPublicKeyPem: k.root.publicKeyPem },
      { trustBundles: b, rootPublicKeyPem: k.root.publicKeyPem },
    ]) {
      const s = createSession(g, {
        actorId: 'a',
        signingKey: k.actor.privateKeyPem,
        now: () => T0,
        revocationFromBundles: o as never,
      });
      assert.is(await codeOf(s.createSba(pay)), 'revocation_unavailable', JSON.stringify(Object.keys(o)));
    }
  },
);

test(
  'a root rotated while the session lives: bundles of the retired key vouch no more, ' +
    "the new key's revocation counts",
  async () => {
    const k = await keys();
    const r = await rotatedRoot(k);
    const s4 = await rotate4(r);
    const g = await grant(k);
    const installed: unknown[] = [await bundleBy(k, r.bk3)];
    const opts = {
      trustBundles: () => installed,
      rootPublicKeyPem: k.root.publicKeyPem,
      rootChain: [r.s2, r.s3] as unknown[],
      minRootVersion: 3,
    };
    const s = createSession(g, {
      actorId: 'v',
      signingKey: k.actor.privateKeyPem,
      now: () => T0,
      revocationFromBundles: opts,
    });
    const pay = () => s.createSba({ amount: '30', currency: 'USD', rail: 'card' });
    await pay();
    // Version 4 retires bundle key bk3 (compromised) and revokes the grant in a bk4 bundle.
    opts.rootChain = [r.s2, r.s3, s4];
    opts.minRootVersion = 4;
    installed.splice(
      0,
      installed.length,
      await bundleBy(k, r.bk3, { sequence: 9 }),
      await bundleBy(k, r.bk4, { sequence: 10, revokedGrants: [g.grantId] }),
    );
    let refused: unknown;
    try {
      await pay();
    } catch (e) {
      refused = e;
    }
    assert.ok(refused instanceof CtlGrantRevokedError, String(refused));
  },
);

test.run();
