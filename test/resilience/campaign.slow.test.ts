/**
 * The short crash campaign (bench/campaign.mjs): 10 SIGKILLs of the gateways on PostgreSQL (two
 * instances, one schema) and SQLite while agents pay an x402 and an X-Payment merchant; after each
 * kill and at the end the books must balance across the merchants, the receipts and the
 * sessions. PostgreSQL itself is not restarted here: other tests share it (the full run does).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';

const campaignUrl = new URL('../../../bench/campaign.mjs', import.meta.url).href;

test(
  '10 kills: nothing paid twice, every payment receipted, spent within the ceiling, ' +
    'every reservation settled, every webhook delivered',
  async () => {
    const { runCampaign, printFigures } = await import(campaignUrl);
    const r = await runCampaign({ kills: 10, pgRestart: false, pgUrl: process.env.CTL_TEST_PG_URL });
    printFigures(r.figures);
    for (const p of r.perKill)
      assert.ok(p.ok, `after kill ${p.k} (${p.victim}): ${p.error ?? JSON.stringify(p.invariants)}`);
    assert.is(r.figures.diedUnbidden, 0, "no gateway died of anything but the campaign's kills");
    assert.ok(r.final.ok, `final books (seed ${r.figures.seed}): ${JSON.stringify(r.final.invariants ?? r.final)}`);
    assert.ok(r.ok);
    // The run did what it claims: ten kills, money moved on both rails, some sessions hit their ceiling.
    assert.is(r.figures.kills, 10);
    assert.ok(r.figures.paid > 0 && r.figures.transfers === r.figures.receipts, 'every transfer has its receipt');
    assert.ok((r.figures.refusedBy.budget_exceeded ?? 0) > 0, 'some sessions reached their ceiling');
    assert.ok(r.figures.webhooks.distinct > 0, 'webhooks were delivered');
  },
);

test.run();
