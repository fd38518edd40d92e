// The middleware reads a body SBA from the body's own text when the request still has it, with the
// strict I-JSON parser (PROTOCOL.md §2, §6): a member repeated inside the SBA is `malformed`, as on
// the header path. Real Express and Koa apps, each body-parser setup a merchant would use.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import Koa from 'koa';
import { bodyParser } from '@koa/bodyparser';
import { ctl, ctlKoa, createSession, encodeSbaHeader } from '../../src/index.js';
import { withFreshLedger } from '../helpers/fresh-ledger.js';
import { sbaFromBodyText } from '../../src/verifier/presentation.js';
import { keys, grant, fakeAuthority, T0, type Keys } from '../helpers/fixtures.js';

let k: Keys;
let sbaJson: any;
let valid: string;
let duplicated: string;
test.before(async () => {
  k = await keys();
  const g = await grant(k);
  const s = createSession(g, {
    actorId: 'v',
    signingKey: k.actor.privateKeyPem,
    fetch: fakeAuthority(k).fetch,
    now: () => T0,
  });
  sbaJson = await s.createSba({ amount: '30', currency: 'USD', rail: 'x402', merchantId: 'merchant-a' });
  valid = JSON.stringify({ sba: sbaJson });
  // A member repeated inside the SBA's authorization; the last one is the signed value, so
  // JSON.parse (which keeps the last) sees a valid SBA.
  duplicated = valid.replace('"budgetId":', '"budgetId":"other","budgetId":');
  assert.is.not(duplicated, valid);
  assert.equal(JSON.parse(duplicated), JSON.parse(valid));
});

// One SBA along many paths, not replay: a fresh ledger at every request.
const options = (extra: object = {}) =>
  withFreshLedger({
    amount: '30',
    currency: 'USD',
    merchantId: 'merchant-a',
    offline: true,
    signingKeyPem: k.authority.publicKeyPem,
    now: () => T0,
    ...extra,
  });

async function serve(handler: http.RequestListener, run: (url: string) => Promise<void>) {
  const server = http.createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    await run(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  } finally {
    server.close();
  }
}

const post = (url: string, body: string, headers: Record<string, string> = {}) =>
  fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });

async function expectCode(res: Response, code: string, why: string) {
  assert.is(res.status, 402, why);
  assert.is((await res.json()).error.code, code, why);
}

function expressApp(parser: express.RequestHandler, extra: object = {}) {
  const app = express();
  app.use(parser);
  app.post('/pay', ctl(options(extra)), (req, res) => {
    res.json({ paid: req.ctl!.amount, budgetId: req.ctl!.sba.authorization.budgetId });
  });
  return app;
}

const keepRawBody = (req: any, _res: unknown, buf: Buffer) => {
  req.rawBody = buf;
};

test('Express: the raw path refuses a repeated member inside the SBA, accepts the valid one', async () => {
  const setups: [string, express.RequestHandler][] = [
    ['express.json() with req.rawBody from its verify hook', express.json({ verify: keepRawBody })],
    ["express.text({ type: 'application/json' })", express.text({ type: 'application/json' })],
    ["express.raw({ type: 'application/json' })", express.raw({ type: 'application/json' })],
  ];
  for (const [name, parser] of setups) {
    await serve(expressApp(parser), async (url) => {
      const ok = await post(url + '/pay', valid);
      assert.is(ok.status, 200, name);
      assert.equal(await ok.json(), { paid: '30', budgetId: sbaJson.authorization.budgetId }, name);
      const dup = await post(url + '/pay', duplicated);
      await expectCode(dup, 'malformed', name);
    });
  }
});

test('Express: a body that is not JSON leaves the SBA to the header; no SBA at all is malformed', async () => {
  await serve(expressApp(express.text({ type: '*/*' })), async (url) => {
    const viaHeader = await post(url + '/pay', 'plain text, not JSON', {
      'content-type': 'text/plain',
      authorization: encodeSbaHeader(sbaJson),
    });
    assert.is(viaHeader.status, 200);
    const json = await post(url + '/pay', '{"order":1}', { authorization: encodeSbaHeader(sbaJson) });
    assert.is(json.status, 200, 'JSON without sba: the header');
    await expectCode(
      await post(url + '/pay', 'plain text', { 'content-type': 'text/plain' }),
      'malformed',
      'nothing presented',
    );
  });
});

test('Express: express.json() alone has lost the check (documented); requireRawBody refuses such a body', async () => {
  await serve(expressApp(express.json()), async (url) => {
    const lossy = await post(url + '/pay', duplicated);
    assert.is(lossy.status, 200, 'JSON.parse kept the last member: the documented gap of a parsed body');
  });
  await serve(expressApp(express.json(), { requireRawBody: true }), async (url) => {
    await expectCode(await post(url + '/pay', valid), 'malformed', 'a parsed body under requireRawBody');
    const viaHeader = await fetch(url + '/pay', {
      method: 'POST',
      headers: { authorization: encodeSbaHeader(sbaJson) },
    });
    assert.is(viaHeader.status, 200, 'the header path is unaffected');
  });
  await serve(expressApp(express.json({ verify: keepRawBody }), { requireRawBody: true }), async (url) => {
    assert.is((await post(url + '/pay', valid)).status, 200, 'with the raw text kept, requireRawBody accepts');
    await expectCode(await post(url + '/pay', duplicated), 'malformed', 'and refuses the repeated member');
  });
});

function koaApp(extra: object = {}) {
  const app = new Koa();
  app.use(bodyParser());
  app.use(ctlKoa(options(extra)));
  app.use((ctx) => {
    ctx.body = { paid: ctx.state.ctl.amount };
  });
  return app;
}

test('Koa with @koa/bodyparser (ctx.request.rawBody): repeated member refused, valid accepted', async () => {
  await serve(koaApp().callback(), async (url) => {
    const ok = await post(url, valid);
    assert.is(ok.status, 200);
    assert.equal(await ok.json(), { paid: '30' });
    await expectCode(await post(url, duplicated), 'malformed', 'koa raw path');
    assert.is(
      (await fetch(url, { method: 'POST', headers: { authorization: encodeSbaHeader(sbaJson) } })).status,
      200,
      'header',
    );
  });
  await serve(koaApp({ requireRawBody: true }).callback(), async (url) => {
    assert.is((await post(url, valid)).status, 200, '@koa/bodyparser keeps the raw text: requireRawBody is met');
  });
});

test('sbaFromBodyText: strict on what presents an SBA, silent on what does not', () => {
  assert.equal(sbaFromBodyText(valid), { sba: JSON.parse(valid).sba });
  assert.equal(sbaFromBodyText(new TextEncoder().encode(valid)), { sba: JSON.parse(valid).sba });
  assert.throws(() => sbaFromBodyText(duplicated), /I-JSON|duplicate/);
  assert.throws(() => sbaFromBodyText('{"sba":1,"sba":2}'), /duplicate/);
  assert.equal(sbaFromBodyText('{"a":1,"a":2}'), { sba: undefined }, 'no SBA presented: the header decides');
  assert.equal(sbaFromBodyText('{"order":1}'), { sba: undefined });
  assert.is(sbaFromBodyText('a=1&sba=x'), undefined, 'not JSON');
  assert.is(sbaFromBodyText('  '), undefined);
  assert.is(sbaFromBodyText(new Uint8Array([0xff, 0xfe])), undefined, 'not UTF-8');
});

test.run();
