/**
 * The crash campaign (bench/campaign.mjs) with its x402 money on a real EVM node: anvil carries
 * USDC, the stock facilitator settles over JSON-RPC, the gateways (PostgreSQL and SQLite, SIGKILLed
 * 10 times at seeded random points) read the node through CTL_X402_RPC_URL. After each kill and at
 * the end: nothing paid twice, every settled amount receipted, and the sessions' x402 books equal
 * to what left the payer's account on the node.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';

const campaignUrl = new URL('../../../bench/campaign.mjs', import.meta.url).href;

test('10 kills with x402 on anvil: 0 paid twice, every settle counted, books = the node', async () => {
  const { runCampaign, printFigures } = await import(campaignUrl);
  const r = await runCampaign({ kills: 10, pgRestart: false, pgUrl: process.env.CTL_TEST_PG_URL, x402Node: true });
  printFigures(r.figures);
  for (const p of r.perKill)
    assert.ok(p.ok, `after kill ${p.k} (${p.victim}): ${p.error ?? JSON.stringify(p.invariants)}`);
  assert.is(r.figures.diedUnbidden, 0, "no gateway died of anything but the campaign's kills");
  assert.ok(r.final.ok, `final books (seed ${r.figures.seed}): ${JSON.stringify(r.final.invariants ?? r.final)}`);
  assert.ok(r.final.invariants.booksEqualChain?.ok, 'the books were compared with the node');
  assert.ok(r.ok);
  assert.is(r.figures.kills, 10);
  assert.ok(BigInt(r.figures.chainMovedMinor) > 0n, 'x402 money moved on the node');
  assert.ok(r.figures.paid > 0 && r.figures.transfers === r.figures.receipts, 'every transfer has its receipt');
});

test.run();
