/**
 * The device's bundle refresh job (spec §8: "devices must reject expired bundles and should begin
 * refreshing before expiry"), as `ctl bundle refresh` runs it: fetch from the authority, keep the
 * bundle while it is fresh, refresh in the last quarter of its life, keep the old one when the
 * authority is unreachable, and end with no valid bundle (offline payments refused) after expiry.
 *
 *   npm run compile && node build/examples/bundle-refresh/main.js
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as CTL from '../../src/index.js';
import { refreshTrustBundle } from '../../cli/bundle.js';
import { expect, startLocalAuthority } from '../shared/local-authority.js';

const HOUR = 3_600_000;
const work = mkdtempSync(join(tmpdir(), 'ctl-refresh-'));
const root = await CTL.generateKeyPair({ alg: 'EdDSA' });
const authority = await startLocalAuthority(root.privateKeyPem);
const scope = { category: 'ev-charging', region: 'eu' };
const job = (at: number): ReturnType<typeof refreshTrustBundle> =>
  refreshTrustBundle({
    authority: authority.url,
    scope,
    rootPublicKeyPem: root.publicKeyPem,
    storeDir: work,
    now: () => at,
  });
let t0 = 0;
/** A time on the example's own clock, as the labels read it (t+6.5h). */
const offset = (iso: string) => `t+${Math.round(((Date.parse(iso) - t0) / HOUR) * 100) / 100}h`;
const show = (label: string, r: Awaited<ReturnType<typeof refreshTrustBundle>>) =>
  console.log(
    `${label}: ${r.action}` +
      (r.bundle ? `, holding sequence ${r.bundle.sequence}` : ', no valid bundle') +
      (r.reason ? ` (${r.reason})` : '') +
      (r.refreshAt ? `, next refresh from ${offset(r.refreshAt)} (${r.refreshAt})` : ''),
  );
try {
  // The authority signs at its own (wall) clock; the device's clock is simulated: a bundle issued
  // "at t+6.5h" is one that expires 8 h after that.
  const issue = (atHours: number) =>
    authority.call('POST', '/trust-bundles', {
      scope,
      expiresAt: new Date(Date.now() + (atHours + 8) * HOUR).toISOString(),
    });
  await issue(0);
  t0 = Date.now();
  const first = await job(t0);
  show('t+0h', first);
  expect(first.action === 'updated' && first.bundle?.sequence === 1, 'first fetch');
  const fresh = await job(t0 + 2 * HOUR);
  show('t+2h', fresh);
  expect(fresh.action === 'fresh', 'fresh: no fetch');
  await issue(6.5); // the authority publishes sequence 2, valid until t+14.5h
  const refreshed = await job(t0 + 6.5 * HOUR); // last quarter of an 8 h life
  show('t+6.5h', refreshed);
  expect(refreshed.action === 'updated' && refreshed.bundle?.sequence === 2, 'refreshed before expiry');
  await authority.close();
  const down = await job(t0 + 12 * HOUR); // the last quarter of sequence 2's life
  show('t+12h (authority unreachable)', down);
  expect(down.action === 'failed' && down.bundle?.sequence === 2, 'old bundle kept');
  const expired = await job(t0 + 15 * HOUR);
  show('t+15h (still unreachable)', expired);
  expect(expired.action === 'failed' && !expired.bundle, 'no valid bundle after expiry: offline payments are refused');
  console.log('OK bundle-refresh');
} finally {
  await authority.close();
  rmSync(work, { recursive: true, force: true });
}
