/**
 * A daily allowance (PROTOCOL.md §13): a grant of 50.00 in all with at most 10.00 a day, the days
 * starting at midnight in Berlin. The wallet pays until the day's window is full and refuses the
 * next payment with `window_exceeded` and the time the window resets; the next day it pays again,
 * and the lifetime 50.00 still bounds every day together.
 *
 *   npm run compile && node build/examples/daily-allowance/main.js
 */
import * as CTL from '../../src/index.js';
import * as Wallet from '../../src/entries/wallet.js';
import { expect, startLocalAuthority } from '../shared/local-authority.js';

const eur = (minor: string | bigint) => `${(Number(minor) / 100).toFixed(2)} EUR`;
const DAY = 86_400_000;

/**
 * The last midnight in `timeZone`, written in UTC as `windowsStart` wants it. Windows are fixed
 * 24-hour steps from it: when daylight saving changes, the day starts an hour off (PROTOCOL.md §13).
 */
function lastLocalMidnight(timeZone: string, now: number): string {
  const parts = (t: number) =>
    Object.fromEntries(
      new Intl.DateTimeFormat('en-US', {
        timeZone,
        hourCycle: 'h23',
        year: 'numeric',
        month: 'numeric',
        day: 'numeric',
        hour: 'numeric',
        minute: 'numeric',
      })
        .formatToParts(t)
        .map((p) => [p.type, Number(p.value)]),
    ) as Record<string, number>;
  const p = parts(now);
  const asUtc = Date.UTC(p['year']!, p['month']! - 1, p['day']!);
  // The zone's offset at that midnight: its wall clock there, less the same figures read as UTC.
  const q = parts(asUtc);
  const offset = Date.UTC(q['year']!, q['month']! - 1, q['day']!, q['hour']!, q['minute']!) - asUtc;
  return new Date(asUtc - offset).toISOString().replace(/\.000Z$/, 'Z');
}

const root = await CTL.generateKeyPair({ alg: 'EdDSA' });
const actor = await CTL.generateKeyPair({ alg: 'EdDSA' });
const authority = await startLocalAuthority(root.privateKeyPem);
try {
  const { policyHash } = await authority.call('POST', '/policies', { policy: { allowance: 'pocket money' } });
  const windowsStart = lastLocalMidnight('Europe/Berlin', Date.now());
  const grant = await authority.call('POST', '/grants', {
    policyHash,
    actorKey: actor.publicJwk,
    allowedRails: ['card'],
    allowedAssets: [{ standard: 'iso4217', code: 'EUR' }],
    maxAmountMinor: '5000',
    currency: 'EUR',
    expiresAt: new Date(Date.now() + 30 * DAY).toISOString(),
    windows: [{ every: 'P1D', maxAmountMinor: '1000' }],
    windowsStart,
  });
  console.log(`grant ${grant.grantId}: ${eur('5000')} in all, ${eur('1000')} a day`);
  console.log(`days start at midnight in Berlin: windowsStart ${windowsStart}`);

  const clock = { t: Date.now() };
  const wallet = Wallet.createSession(grant, {
    actorId: 'teen-1',
    signingKey: actor.privateKeyPem,
    now: () => clock.t,
  });
  const remaining = async () => {
    const r = await wallet.remaining();
    const day = r.windows![0]!;
    console.log(
      `  remaining(): ${eur(r.remainingMinor)} in all, today ${eur(day.remainingMinor)}, resets ${day.resetsAt}`,
    );
    return r;
  };
  const pay = async (amount: string) => {
    try {
      await wallet.createSba({ amount, currency: 'EUR', rail: 'card' });
      console.log(`pay ${eur(amount)}: signed`);
      return 'ok';
    } catch (e) {
      const err = e as CTL.CtlError;
      console.log(`pay ${eur(amount)}: refused (${err.code}${err.resetsAt ? `, resetsAt ${err.resetsAt}` : ''})`);
      return err.code;
    }
  };

  console.log('day 1');
  expect((await pay('400')) === 'ok', 'first payment');
  expect((await pay('400')) === 'ok', 'second payment');
  const before = await wallet.remaining();
  expect((await pay('400')) === 'window_exceeded', 'the day is full');
  const refused = await wallet.createSba({ amount: '400', currency: 'EUR', rail: 'card' }).catch((e) => e);
  expect((refused as CTL.CtlError).resetsAt === before.windows![0]!.resetsAt, 'resetsAt is the next local midnight');
  expect((await pay('200')) === 'ok', 'what is left of the day still fits');
  expect((await remaining()).windows![0]!.remainingMinor === '0', 'the day is spent');

  clock.t += DAY;
  console.log('day 2 (the clock moved on by a day)');
  const day2 = await remaining();
  expect(day2.windows![0]!.remainingMinor === '1000' && day2.remainingMinor === '4000', 'a new day');
  expect((await pay('400')) === 'ok', 'the next day pays again');
  await remaining();

  for (let d = 3; d <= 5; d++) {
    clock.t += DAY;
    console.log(`day ${d}`);
    expect((await pay('1000')) === 'ok', `day ${d}`);
  }
  clock.t += DAY;
  console.log('day 6');
  const end = await remaining();
  expect(end.remainingMinor === '600', '44.00 spent over five days');
  expect((await pay('700')) === 'budget_exceeded', 'the lifetime ceiling bounds the days together');
  expect((await pay('600')) === 'ok', 'the last 6.00 fits');
  await remaining();
  console.log('OK daily-allowance');
} finally {
  await authority.close();
}
