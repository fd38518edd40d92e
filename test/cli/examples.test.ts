/** Every example in examples/ runs to its end (exit 0, its closing OK line) and tells its story. */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { root } from '../../firmware-bridge/node/device-script.js';

const expected: Record<string, RegExp[]> = {
  'provision-root': [
    /provisioned charger-001/,
    /a different root is refused \(already_provisioned\)/,
    /another root is refused \(trust_bundle_invalid\)/,
  ],
  'human-agent': [
    /Alex's DID: did:key:z6Mk\S+ \(key file mode 0600\)/,
    /hotel \(online\) 12\.00 EUR: accepted/,
    /rail kiosk \(offline, bundle\) 5\.00 EUR: accepted/,
    /6\.00 EUR more: refused by the wallet \(budget_exceeded\)/,
    /presented at the kiosk: refused \(destination_not_allowed/,
    /next online payment \(hotel\): refused \(grant_revoked\)/,
    /audit trail of the grant: grant\.issue, grant\.revoke/,
  ],
  'ev-charger-offline': [
    /session 3: .* accepted/,
    /session 4: .* refused \(offline_limit_exceeded\)/,
    /refused \(replay\)/,
    /counters in flash: 3 payments, 58\.00 EUR/,
  ],
  'fleet-wallet': [
    /remaining 25\.00 EUR/,
    /CtlBudgetExceededError \(budget_exceeded\)/,
    /after revocation: CtlGrantRevokedError \(grant_revoked\)/,
  ],
  'ev-charger-hold': [
    /wallet while held: remaining 170\.00 EUR, today 20\.00 EUR/,
    /charger verifies the hold for 30\.00 EUR: accepted/,
    /charger captures 31\.00 EUR: refused \(capture_exceeds_hold\)/,
    /charger captures 12\.34 EUR: captured 12\.34 EUR/,
    /charger captures 12\.34 EUR: refused \(replay\)/,
    /wallet after the capture: remaining 187\.66 EUR, today 37\.66 EUR/,
  ],
  'daily-allowance': [
    /pay 4\.00 EUR: refused \(window_exceeded, resetsAt \d{4}-\d\d-\d\dT\d\d:00:00Z\)/,
    /day 2 \(the clock moved on by a day\)\n  remaining\(\): 40\.00 EUR in all, today 10\.00 EUR/,
    /pay 7\.00 EUR: refused \(budget_exceeded\)/,
    /remaining\(\): 0\.00 EUR in all/,
  ],
  'ai-agent': [
    /doc 4 → .*HTTP 200/,
    /owner approves/,
    /doc 6 → .*HTTP 200/,
    /owner declines/,
    /doc 7 not paid: session_paused/,
    /6 calls paid, spent 150/,
  ],
  'vehicle-lends-unit': [
    /unit pays 9\.00 EUR at the terminal \(offline\): accepted/,
    /unit asks 5\.00 EUR for energy:charging: refused by its wallet \(budget_exceeded\)/,
    /reset unit pays 5\.00 EUR at the terminal \(offline\): refused \(budget_exceeded\)/,
    /bundle sequence 2 lists revoked: the slice's link \([0-9a-f]{16}…\)/,
    /after revocation: 3\.00 EUR at the terminal \(offline\): refused \(grant_revoked\)/,
    /3 payments, 47\.00 EUR of the 100\.00 EUR offline allowance/,
  ],
  'agent-sub-agents': [
    /delegated 80\.00 EUR for travel:hotel/,
    /delegated 80\.00 EUR for travel:rail/,
    /train pays 25\.00 EUR: refused \(budget_exceeded/,
    /16 × 1\.00 EUR at once: 10 accepted, 6 refused \(budget_exceeded\)/,
    /together: 100\.00 EUR of the parent's 100\.00 EUR/,
  ],
  'mpp-merchant': [
    /agent: tides → HTTP 200 .*Payment-Receipt evm success 0x[0-9a-f]{8}…; CTL receipt rcpt_/,
    /agent: swell not paid: budget_exceeded/,
    /owner: spent 0\.02 USDC of 0\.025 USDC, 2 receipts \(mpp:eip155:84532:0x[0-9a-f]{40}, mpp:/,
    /ledger: merchant received 0\.02 USDC in 2 transfers/,
  ],
  'bundle-refresh': [
    /t\+0h: updated, holding sequence 1, next refresh from t\+/,
    /t\+2h: fresh/,
    /t\+6\.5h: updated, holding sequence 2/,
    /unreachable\): failed, holding sequence 2/,
    /no valid bundle/,
  ],
};

for (const [name, lines] of Object.entries(expected)) {
  test(`examples/${name}`, () => {
    const r = spawnSync(process.execPath, [join(root, 'build', 'examples', name, 'main.js')], {
      cwd: root,
      encoding: 'utf8',
      timeout: 60_000,
    });
    assert.is(r.status, 0, `${name} exited ${r.status}\n${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, new RegExp(`^OK ${name}$`, 'm'));
    for (const l of lines) assert.match(r.stdout, l, `${name}: ${l}`);
    // A next refresh is never before the moment it is printed at (t+Xh: … next refresh from t+Yh).
    for (const m of r.stdout.matchAll(/^t\+([\d.]+)h.*next refresh from t\+(-?[\d.]+)h/gm)) {
      assert.ok(Number(m[2]) >= Number(m[1]), `next refresh in the past: ${m[0]}`);
    }
  });
}

test.run();
