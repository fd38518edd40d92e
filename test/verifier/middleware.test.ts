import { test } from 'uvu';
import * as assert from 'uvu/assert';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import { bodyParser } from '@koa/bodyparser';
import { ctl, ctlKoa, createSession, encodeSbaHeader } from '../../src/index.js';
import { withFreshLedger } from '../helpers/fresh-ledger.js';
import { keys, grant, fakeAuthority, T0, type Keys } from '../helpers/fixtures.js';

let k: Keys;
let sbaJson: any;
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
});

// One SBA along many paths, not replay: a fresh ledger at every request.
const options = () =>
  withFreshLedger({
    amount: '30',
    currency: 'USD',
    merchantId: 'merchant-a',
    offline: true,
    signingKeyPem: k.authority.publicKeyPem,
    now: () => T0,
  });

async function listen(server: http.Server) {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

test('Express/Connect ctl(): header and body presentation, 402 with a structured error', async () => {
  const mw = ctl(options());
  const server = http.createServer((req: any, res) => {
    let raw = '';
    req.on('data', (d: Buffer) => (raw += d));
    req.on('end', () => {
      req.body = raw ? JSON.parse(raw) : undefined;
      mw(req, res, () => {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ paid: req.ctl.amount, grantId: req.ctl.grant.grantId }));
      });
    });
  });
  const url = await listen(server);
  try {
    const viaHeader = await fetch(url, { method: 'POST', headers: { authorization: encodeSbaHeader(sbaJson) } });
    assert.is(viaHeader.status, 200);
    assert.equal(await viaHeader.json(), { paid: '30', grantId: sbaJson.grant.grantId });
    const viaBody = await fetch(url, { method: 'POST', body: JSON.stringify({ sba: sbaJson }) });
    assert.is(viaBody.status, 200);
    const none = await fetch(url, { method: 'POST' });
    assert.is(none.status, 402);
    assert.is((await none.json()).error.code, 'malformed');
    const tampered = structuredClone(sbaJson);
    tampered.authorization.maxAmountMinor = '29';
    const bad = await fetch(url, { method: 'POST', body: JSON.stringify({ sba: tampered }) });
    assert.is(bad.status, 402);
    const body = await bad.json();
    assert.is(body.error.code, 'sba_signature_invalid');
    assert.type(body.error.message, 'string');
  } finally {
    server.close();
  }
});

test('Koa ctlKoa(): sets ctx.state.ctl, answers 402 on failure, amount from the request', async () => {
  const app = new Koa();
  app.use(bodyParser());
  app.use(ctlKoa({ ...options(), amount: (ctx: any) => String(ctx.query.price ?? '30') }));
  app.use((ctx) => {
    ctx.body = { paid: ctx.state.ctl.amount, valid: ctx.state.ctl.valid };
  });
  const server = http.createServer(app.callback());
  const url = await listen(server);
  try {
    const ok = await fetch(url, { method: 'POST', headers: { authorization: encodeSbaHeader(sbaJson) } });
    assert.is(ok.status, 200);
    assert.equal(await ok.json(), { paid: '30', valid: true });
    const tooMuch = await fetch(url + '/?price=31', {
      method: 'POST',
      headers: { authorization: encodeSbaHeader(sbaJson) },
    });
    assert.is(tooMuch.status, 402);
    assert.is((await tooMuch.json()).error.code, 'amount_exceeds_authorization');
    const garbage = await fetch(url, { method: 'POST', headers: { authorization: 'CTL !!!' } });
    assert.is(garbage.status, 402);
  } finally {
    server.close();
  }
});

test.run();
