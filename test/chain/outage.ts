/**
 * The outage scenario both stores run (anchor-outage.test.ts, anchor-outage-pg.test.ts): the node
 * is down for an hour while the log grows, on a clock the test moves; the outbox restarts in the
 * middle. Expected: attempts spaced by the backoff (never more often than the cap allows once it
 * is reached, never a request per head), one `anchor.stalled` event and the stalled gauge after
 * the alert delay, the heads that came meanwhile folded into one, and once the node is back one
 * anchor of the newest head, confirmed.
 */
import * as assert from 'uvu/assert';
import { Registry } from 'prom-client';
import { createPublicClient, http, keccak256, toBytes } from 'viem';
import { createChainOutbox, type ChainEvent, type ChainOutbox } from '../../service-kit/anchor/index.js';
import { auditHeadSource } from '../../service-kit/anchor/service.js';
import { ANCHORED_EVENT } from '../../service-kit/chain/contracts.js';
import type { Anvil } from '../helpers/anvil.js';
import { ORIGIN, chainDb, cuttableFetch, evmLedger, testClock } from './fixtures.js';

const MINUTE = 60_000;
const STEP = 20_000;

export async function outageScenario(anvil: Anvil, contract: `0x${string}`, store: 'sqlite' | 'postgres') {
  const d = await chainDb(store);
  const clock = testClock();
  const cut = cuttableFetch();
  const events: ChainEvent[] = [];
  let registry = new Registry();
  const make = async (): Promise<ChainOutbox> =>
    createChainOutbox({
      db: d.db,
      ledgers: [await evmLedger(anvil, { anchorContract: contract, fetch: cut.fetch })],
      sources: [auditHeadSource(d.audit, ORIGIN)],
      now: clock.now,
      anchorIntervalMs: MINUTE,
      baseDelayMs: 5000,
      maxDelayMs: 5 * MINUTE,
      alertAfterMs: 30 * MINUTE,
      leaseMs: 2 * MINUTE,
      onEvent: (e) => events.push(e),
      // A restarted process registers its metrics afresh: one registry per instance, as in a service.
      metrics: { registry: (registry = new Registry()), prefix: 'ctl_test_' },
    });
  try {
    await d.grow(2);
    cut.state.down = true;
    let outbox = await make();
    const attemptsAt: number[] = [];
    let lastAttempts = 0;
    // An hour, a pass every 20 s (the service's timer runs every second; the backoff decides).
    for (let t = 0; t <= 60 * MINUTE; t += STEP) {
      if (t > 0 && t % (5 * MINUTE) === 0) await d.grow(1); // the log keeps growing
      if (t === 25 * MINUTE) {
        // A restart in the middle of the outage: the lease of the dead instance runs out first.
        await outbox.close();
        clock.advance(2 * MINUTE + 1);
        outbox = await make();
      }
      const calls = cut.state.calls;
      await outbox.runOnce();
      if (cut.state.calls > calls) attemptsAt.push(clock.now());
      const [row] = (await outbox.list({ status: 'pending' })).slice(0, 1);
      assert.ok(row, 'a pending anchor throughout');
      assert.ok(row!.attempts >= lastAttempts, 'the attempts carry over superseded heads and the restart');
      lastAttempts = row!.attempts;
      clock.advance(STEP);
    }
    // Backoff: 5 s doubling to the 5-minute cap; an hour makes about twenty attempts, not 360.
    assert.ok(attemptsAt.length >= 10 && attemptsAt.length <= 25, `${attemptsAt.length} attempts in the hour`);
    const gaps = attemptsAt.slice(1).map((a, i) => a - attemptsAt[i]!);
    assert.ok(
      gaps.slice(-5).every((g) => g >= 5 * MINUTE - 10_000),
      `late gaps at the cap: ${gaps.slice(-5)}`,
    );
    const stalled = events.filter((e) => e.type === 'anchor.stalled');
    assert.is(stalled.length, 1, 'one stalled event');
    assert.match(
      String((await registry.getSingleMetric('ctl_test_chain_jobs_stalled')!.get()).values[0]?.value),
      /^1$/,
    );
    assert.is(events.filter((e) => e.type === 'anchor.submitted').length, 0);
    const superseded = await outbox.list({ status: 'superseded', limit: 1000 });
    assert.ok(superseded.length >= 10, `${superseded.length} heads folded into the newest`);

    // The node is back: the newest head is anchored once and confirmed.
    cut.state.down = false;
    const head = await d.grow(1);
    clock.advance(7 * MINUTE); // past the longest backoff (the cap and its jitter)
    await outbox.runOnce({ readHeads: true });
    clock.advance(10_000);
    await outbox.runOnce({ readHeads: false });
    const done = await outbox.list({ status: 'confirmed' });
    assert.is(done.length, 1);
    assert.equal(done[0]!.job, { kind: 'anchor', head, source: 'audit-head' });
    assert.is(events.filter((e) => e.type === 'anchor.confirmed').length, 1);
    const logs = await createPublicClient({ transport: http(anvil.url) }).getLogs({
      address: contract,
      event: ANCHORED_EVENT,
      args: { originHash: keccak256(toBytes(ORIGIN)) },
      fromBlock: 0n,
    });
    assert.equal(
      logs.filter((l) => l.transactionHash === done[0]!.txid).map((l) => Number(l.args.size)),
      [head.size],
    );
    await outbox.close();
  } finally {
    await d.close();
  }
}
