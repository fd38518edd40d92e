/**
 * The agent client against a real gateway (SQLite) with budget windows and child sessions:
 * onSoftLimit tells a window's pause (its period and reset) from the ceiling's, a full window
 * throws `window_exceeded` with its reset, and `session.delegate(...)` gives a sub-agent a child
 * session that sees only its own slice, is refused past it while the parent still has room, and
 * whose spend counts on the parent.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createGatewayClient, type SoftLimitInfo } from '../../src/client/index.js';
import { CtlError } from '../../src/errors.js';
import { inOneHour, useGatewayAndMerchant } from '../gateway/helpers.js';

const env = useGatewayAndMerchant(test, { amount: (p) => /^\/p(\d+)/.exec(p)?.[1] ?? '100' });
const owner = () => createGatewayClient({ baseUrl: env.gw.url, ownerKey: env.gw.ownerKey });
const agentClient = () => createGatewayClient({ baseUrl: env.gw.url });
const day = (iso: string) => Date.parse(iso) - Date.now();

test('onSoftLimit says kind window, with its period and reset, for a window pause', async () => {
  const s = await owner().createSession({
    budget: { amount: '1000', currency: 'USD' },
    purposes: ['api:search'],
    expiresAt: inOneHour(),
    softLimit: { amount: '50' },
    windows: [{ every: 'P1D', maxAmountMinor: '100' }],
  });
  const seen: SoftLimitInfo[] = [];
  const agent = agentClient().session(s.sessionToken, { onSoftLimit: (info) => void seen.push(info) });
  assert.is((await agent.fetch(`${env.merchant.url}/p80`, { purpose: 'api:search' })).status, 200);
  try {
    await agent.fetch(`${env.merchant.url}/p30`, { purpose: 'api:search' });
    assert.unreachable('paused');
  } catch (e) {
    assert.is((e as CtlError).code, 'session_paused');
  }
  assert.is(seen.length, 1);
  const info = seen[0]!;
  assert.is(info.kind, 'window');
  assert.is(info.every, 'P1D');
  assert.ok(info.resetsAt && Math.abs(day(info.resetsAt) - 86_400_000) < 60_000, info.resetsAt);
  const v = await agent.status();
  assert.equal(v.pausedWindow, { every: 'P1D', resetsAt: info.resetsAt });
  assert.is(v.windows?.[0]?.spentMinor, '80');
});

test('onSoftLimit says kind ceiling, with no reset, for a pause at the budget', async () => {
  const s = await owner().createSession({
    budget: { amount: '100', currency: 'USD' },
    purposes: ['api:search'],
    expiresAt: inOneHour(),
    softLimit: { amount: '100' },
  });
  const seen: SoftLimitInfo[] = [];
  const agent = agentClient().session(s.sessionToken, { onSoftLimit: (info) => void seen.push(info) });
  await agent.fetch(`${env.merchant.url}/p100`, { purpose: 'api:search' });
  await agent.fetch(`${env.merchant.url}/p1`, { purpose: 'api:search' }).catch(() => {});
  assert.is(seen.length, 1);
  assert.is(seen[0]!.kind, 'ceiling');
  assert.is(seen[0]!.every, undefined);
  assert.is(seen[0]!.resetsAt, undefined);
});

test('a full window throws window_exceeded with resetsAt and retryAfterSeconds', async () => {
  const s = await owner().createSession({
    budget: { amount: '1000', currency: 'USD' },
    purposes: ['api:search'],
    // Past the window's reset: a reset after the session's end is named as none (the session ends first).
    expiresAt: new Date(Date.now() + 2 * 3_600_000).toISOString(),
    windows: [{ every: 'PT1H', maxAmountMinor: '100' }],
  });
  const agent = agentClient().session(s.sessionToken);
  await agent.fetch(`${env.merchant.url}/p100`, { purpose: 'api:search' });
  try {
    await agent.fetch(`${env.merchant.url}/p1`, { purpose: 'api:search' });
    assert.unreachable('refused');
  } catch (e) {
    const err = e as CtlError & { retryAfterSeconds?: number };
    assert.is(err.code, 'window_exceeded');
    assert.ok(err.resetsAt && Math.abs(day(err.resetsAt) - 3_600_000) < 60_000, err.resetsAt);
    assert.ok(err.retryAfterSeconds! > 3500 && err.retryAfterSeconds! <= 3600, String(err.retryAfterSeconds));
  }
});

test('session.delegate: the child sees its slice, is refused past it, and counts on the parent', async () => {
  const s = await owner().createSession({
    budget: { amount: '1000', currency: 'USD' },
    purposes: ['api:search', 'data:read'],
    expiresAt: inOneHour(),
    windows: [{ every: 'P1D', maxAmountMinor: '900' }],
  });
  // The parent's id is learned from the gateway when not given.
  const parent = agentClient().session(s.sessionToken);
  const made = await parent.delegate({ budget: { amount: '250' }, purposes: ['api:search'], label: 'hotel' });
  assert.is(made.parentId, s.sessionId);
  assert.is(made.depth, 1);

  const child = agentClient().session(made.sessionToken);
  let v = await child.status();
  assert.is(v.sessionId, made.sessionId);
  assert.equal(
    [v.budget.amount, v.remainingMinor, v.purposes, v.parentId],
    ['250', '250', ['api:search'], s.sessionId],
  );
  assert.is(v.windows?.[0]?.every, 'P1D', "the parent's window is kept (no larger than the child's budget)");

  assert.is((await child.fetch(`${env.merchant.url}/p200`, { purpose: 'api:search' })).status, 200);
  const paid = env.merchant.paid.length;
  try {
    await child.fetch(`${env.merchant.url}/p100`, { purpose: 'api:search' });
    assert.unreachable('past the slice');
  } catch (e) {
    assert.is((e as CtlError).code, 'budget_exceeded');
  }
  assert.is(env.merchant.paid.length, paid, 'nothing paid past the slice');
  v = await parent.status();
  assert.equal([v.spentMinor, v.remainingMinor], ['200', '800'], "the parent counts the child's spend");
  assert.is(v.windows?.[0]?.spentMinor, '200');
  assert.is((await parent.fetch(`${env.merchant.url}/p100`, { purpose: 'api:search' })).status, 200);

  // A widening field is delegation_invalid naming it; the child cannot read the parent.
  try {
    await parent.delegate({ budget: { amount: '10' }, purposes: ['api:write'] });
    assert.unreachable('widens');
  } catch (e) {
    assert.is((e as CtlError).code, 'delegation_invalid');
    assert.match((e as Error).message, /^purposes\[0\]/);
  }
  // A grandchild narrows the child (its ceiling, 250), not the root.
  try {
    await child.delegate({ budget: { amount: '251' } });
    assert.unreachable('more than the child has');
  } catch (e) {
    assert.is((e as CtlError).code, 'delegation_invalid');
  }
});

test.run();
