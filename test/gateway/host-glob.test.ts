/**
 * Merchant host globs (PROTOCOL.md §8) are matched in linear time: the hostile globs that froze
 * the event loop under a backtracking regular expression are bounded by a step count, never by a
 * clock; the matcher keeps the glob semantics the sessions were created with (picomatch's, over
 * a host), checked against picomatch on generated globs.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { Worker } from 'node:worker_threads';
import picomatch from 'picomatch';
import { compileHostGlob, hostGlobList, MAX_GLOB_PROGRAM } from '../../gateway/net/host-glob.js';
import { createMerchantMatcher, parseSessionConfig } from '../../gateway/sessions/config.js';

// 253 characters, the longest DNS name: labels of 'a' that end nowhere near example.com.
const LONG = `${'a'.repeat(62)}.${'a'.repeat(62)}.${'a'.repeat(62)}.${'a'.repeat(62)}.b`;
const LONG_NEAR = `${'a.'.repeat(120)}example.co`; // 250 characters, one letter short of a match
const HOSTILE = [
  '*.*.*.*.*.example.com',
  '*'.repeat(30) + 'b',
  Array(30).fill('*a').join('') + 'x', // 30 stars separated by the host's own letter
  '*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*.com',
  '{*,a*}{*,a*}{*,a*}{*,a*}{*,a*}{*,a*}{*,a*}{*,a*}.example.com',
  '!*.*.*.*.*.*.*.*.*.*.*.*.evil',
];

test('hostile globs against 253-character hosts: at most (host length + 1) × program size steps', () => {
  assert.is(LONG.length, 253);
  for (const glob of HOSTILE) {
    const g = compileHostGlob(glob);
    assert.ok(g.size <= 4 * glob.length + 1, `${glob}: program of ${g.size} states`);
    for (const host of [LONG, LONG_NEAR, 'a'.repeat(253)]) {
      const steps = { n: 0 };
      g.test(host, steps);
      // Each state is visited at most once per position, plus one step per live state per character.
      assert.ok(steps.n <= 2 * (host.length + 1) * g.size, `${glob} on ${host.length} chars: ${steps.n} steps`);
      assert.ok(steps.n > 0);
    }
  }
  // The same bound over a whole list, as the payment path checks it.
  const list = hostGlobList(HOSTILE);
  const steps = { n: 0 };
  list(LONG, steps);
  const total = HOSTILE.reduce((a, g) => a + compileHostGlob(g).size, 0);
  assert.ok(steps.n <= 2 * (LONG.length + 1) * total, `${steps.n} steps for the list`);
});

// Through the matcher the payment path uses, in a worker with a hard stop: a backtracking matcher
// takes minutes on these (8.7 s was measured on a 40-character host), so only a regression to one
// can reach the stop; the linear matcher is done in milliseconds on any machine.
test("the payment path's matcher answers the hostile globs (worker, hard stop at 60 s)", async () => {
  const moduleUrl = new URL('../../gateway/sessions/config.js', import.meta.url).href;
  const code = `
    const { parentPort, workerData } = require('node:worker_threads');
    import(workerData.moduleUrl).then(({ createMerchantMatcher }) => {
      const out = [];
      for (const glob of workerData.globs) for (const host of workerData.hosts) {
        out.push(createMerchantMatcher({ merchantAllowlist: [glob], merchantBlocklist: [] })(host));
        out.push(createMerchantMatcher({ merchantAllowlist: [], merchantBlocklist: [glob] })(host));
      }
      parentPort.postMessage(out);
    });`;
  const worker = new Worker(code, { eval: true, workerData: { moduleUrl, globs: HOSTILE, hosts: [LONG, LONG_NEAR] } });
  const result = await new Promise<boolean[] | 'stopped'>((resolve, reject) => {
    const stop = setTimeout(() => {
      void worker.terminate();
      resolve('stopped');
    }, 60_000);
    worker.once('message', (m) => {
      clearTimeout(stop);
      void worker.terminate();
      resolve(m);
    });
    worker.once('error', reject);
  });
  assert.ok(Array.isArray(result), 'the matcher did not finish: it backtracks');
  assert.is(result.length, HOSTILE.length * 4);
});

test('semantics: a star spans dots, the blocklist wins, case and a trailing dot are ignored', () => {
  const m = createMerchantMatcher({
    merchantAllowlist: ['*.example.com', 'api{1..3}.shop.test', 'pay.[a-c]x.io'],
    merchantBlocklist: ['bad.example.com', '!*.*'],
  });
  assert.ok(m('a.example.com'));
  assert.ok(m('a.b.example.com'), '* spans labels, as it always did');
  assert.ok(m('A.Example.COM.'));
  assert.not.ok(m('example.com'));
  assert.not.ok(m('bad.example.com'));
  assert.ok(m('api2.shop.test'));
  assert.not.ok(m('api4.shop.test'));
  assert.ok(m('pay.bx.io'));
  assert.not.ok(m('pay.dx.io'));
  assert.not.ok(m('localhost'), 'blocked by the negated glob: no dot');
  const open = createMerchantMatcher({ merchantAllowlist: [], merchantBlocklist: [] });
  assert.ok(open('anything.example'));
});

// A small deterministic generator: the same globs and hosts on every run.
function prng(seed: number) {
  return () => (seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32;
}

test('the same answers as picomatch on 20 000 generated glob/host pairs', () => {
  const rand = prng(7);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(rand() * xs.length)]!;
  const tokens = [
    'a',
    'b',
    'c',
    '.',
    '1',
    '-',
    '*',
    '**',
    '?',
    '[ab]',
    '[a-c]',
    '[^a]',
    '[.]',
    '{a,b}',
    '{a,.,}',
    '{a*,b}',
    '{a,{b,c}}',
    '{1..3}',
    '{a..c}',
    '{a}',
  ];
  const hostChars = ['a', 'b', 'c', '.', '1', '2', '-'];
  let compared = 0;
  for (let i = 0; i < 2000; i++) {
    const glob =
      (rand() < 0.1 ? '!' : '') + Array.from({ length: 1 + Math.floor(rand() * 5) }, () => pick(tokens)).join('');
    const pm = picomatch(glob, { nocase: true, dot: true });
    const ours = compileHostGlob(glob);
    for (let j = 0; j < 10; j++) {
      const host = Array.from({ length: 1 + Math.floor(rand() * 6) }, () => pick(hostChars)).join('');
      if (host === '.' || host === '..' || host.endsWith('.')) continue; // not hosts (a trailing dot is stripped first)
      assert.is(ours.test(host), pm(host), `${glob} vs ${host}`);
      compared++;
    }
  }
  assert.ok(compared > 15_000);
});

test('a glob list that compiles too large is refused when the session is created (400 naming the field)', () => {
  const base = {
    budget: { amount: '100', currency: 'USD' },
    purposes: ['api:search'],
    expiresAt: '2099-01-01T00:00:00Z',
  };
  const wide = '{0..255}'.repeat(30);
  assert.ok(compileHostGlob(wide).size > MAX_GLOB_PROGRAM);
  assert.throws(
    () => parseSessionConfig({ ...base, merchantAllowlist: [wide] }, Date.now()),
    /merchantAllowlist\[0\]: too many/,
  );
  const many = Array(100).fill('{a,b,c,d,e,f,g,h,i,j}{a,b,c,d,e,f,g,h,i,j}{a,b,c,d,e,f,g,h,i,j}.example.com');
  assert.throws(
    () => parseSessionConfig({ ...base, merchantBlocklist: many }, Date.now()),
    /merchantBlocklist: the globs together/,
  );
  assert.equal(
    parseSessionConfig({ ...base, merchantAllowlist: HOSTILE.filter((g) => g.length <= 253) }, Date.now())
      .merchantAllowlist.length,
    HOSTILE.length,
  );
});

test('a glob that can match no host is refused: a [ or { that is not syntax, a set of no host character', () => {
  const base = {
    budget: { amount: '100', currency: 'USD' },
    purposes: ['api:search'],
    expiresAt: '2099-01-01T00:00:00Z',
  };
  for (const inert of [
    '{1..1000}.evil.com',
    '*.evil.{com,net',
    'evil.{com}',
    '[a-z.evil.com',
    'evil.com]',
    'evil.com}',
    '[z-a]x.com',
    '[[]x.com',
    '[]]x.com',
  ]) {
    assert.ok(compileHostGlob(inert).inert, inert);
    assert.throws(
      () => parseSessionConfig({ ...base, merchantBlocklist: ['ok.example', inert] }, Date.now()),
      /merchantBlocklist\[1\]: .* can match no host/,
      inert,
    );
  }
  for (const fine of ['*.evil.{com,net}', '[a-z]*.evil.com', 'shop{1..3}.example.com', '[!a]x.example.com']) {
    assert.not.ok(compileHostGlob(fine).inert, fine);
    assert.is(parseSessionConfig({ ...base, merchantBlocklist: [fine] }, Date.now()).merchantBlocklist.length, 1, fine);
  }
});

test.run();
