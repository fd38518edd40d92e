/**
 * `refreshTrustBundle` never answers a next refresh in the past: a bundle fetched when it is
 * already inside its refresh window (its last quarter) is due again now, not at a time gone by.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as CTL from '../../src/index.js';
import { refreshTrustBundle } from '../../cli/bundle.js';
import { makeFleet, T0, HOUR } from '../offline/fleet.js';

test('a bundle fetched in its last quarter: next refresh is now, not in the past', async () => {
  const fleet = await makeFleet(CTL);
  const dir = mkdtempSync(join(tmpdir(), 'ctl-refresh-time-'));
  try {
    // Issued T0 - 1 h for 8 h: its refresh window opens at T0 + 5 h; the device runs at T0 + 6 h.
    const bundle = await fleet.bundle(1, { issuedAt: T0 - HOUR, ttlMs: 8 * HOUR });
    const now = T0 + 6 * HOUR;
    const fetchStub = (async () =>
      new Response(JSON.stringify({ bundles: [bundle] }), {
        headers: { 'content-type': 'application/json' },
      })) as typeof fetch;
    const r = await refreshTrustBundle({
      authority: 'https://authority.fleet.example',
      scope: { category: 'ev-charging', region: 'eu' },
      rootPublicKeyPem: fleet.root.publicKeyPem,
      storeDir: dir,
      now: () => now,
      fetch: fetchStub,
    });
    assert.is(r.action, 'updated', r.reason);
    assert.ok(
      Date.parse(r.refreshAt!) >= now,
      `next refresh ${r.refreshAt} is before now ${new Date(now).toISOString()}`,
    );
    // And with --refresh-before larger than what is left of the bundle's life.
    const again = await refreshTrustBundle({
      authority: 'https://authority.fleet.example',
      scope: { category: 'ev-charging', region: 'eu' },
      rootPublicKeyPem: fleet.root.publicKeyPem,
      storeDir: dir,
      now: () => now,
      fetch: fetchStub,
      refreshBeforeMs: 4 * HOUR,
    });
    assert.ok(Date.parse(again.refreshAt!) >= now, `next refresh ${again.refreshAt} is before now`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
