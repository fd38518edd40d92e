/**
 * The requests the gateway makes for a person's grant (its authority's revocation answer, and any
 * JWKS the SDK's verifier would fetch) go through the guarded forwarder like a merchant request:
 * a name that resolves to this machine is refused at connect time, at session creation and before
 * each payment, on another instance too; and a refusal reads the same whatever listens behind the
 * address (no status, no body, no error of the target's).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createSignedPolicyGrant, generateKeyPair, policyHash, verifyCtl, type PolicyGrant } from '../../src/index.js';
import { createForwarder, guardedFetch } from '../../gateway/net/forwarder.js';
import type { LookupFn } from '../../gateway/net/address-guard.js';
import {
  call,
  createSession,
  inOneHour,
  proxy,
  sqliteDb,
  startMerchant,
  startTestGateway,
  type Merchant,
  type TestDb,
  type TestGateway,
} from './helpers.js';
import { freePort } from '../helpers/ports.js';

const person = await generateKeyPair({ alg: 'ES256' });
const servers: Server[] = [];
let merchant: Merchant;

/** A local server counting its connections. */
async function serve(
  handler: Parameters<typeof createServer>[1],
): Promise<{ port: number; connections: () => number }> {
  let n = 0;
  const s = createServer(handler);
  s.on('connection', () => n++);
  await new Promise<void>((r) => s.listen(0, '::', r)); // dual stack: 127.0.0.1 and ::1 both reach it
  servers.push(s);
  return { port: (s.address() as AddressInfo).port, connections: () => n };
}

// Names that look public and resolve to this machine (a hosts entry, internal DNS, rebinding).
const resolve: LookupFn = (host, _o, cb) => {
  if (host.endsWith('.test')) return cb(null, [{ address: '127.0.0.1', family: 4 }]);
  cb(Object.assign(new Error('ENOTFOUND'), { code: 'ENOTFOUND' }), []);
};

// An authority that has recorded every grant it is asked about, not revoked.
const recordsAll = (req: any, res: any) => {
  const id = new URL(req.url!, 'http://x').searchParams.get('grantId');
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ grantId: id, revoked: false }));
};

function personGrant(actorKey: unknown, base: string): Promise<PolicyGrant> {
  return createSignedPolicyGrant(
    {
      profile: 'human-agent',
      policyHash: policyHash({ delegate: 'search' }),
      actorKey: actorKey as any,
      allowedRails: ['ledger'],
      allowedAssets: [{ standard: 'iso4217', code: 'USD' }],
      allowedPurposes: ['api:search'],
      maxAmountMinor: '1000',
      currency: 'USD',
      expiresAt: inOneHour(),
    } as any,
    { signingKey: person.privateKeyPem, revocationBaseUrl: base },
  );
}

async function askSession(gw: TestGateway, base: string) {
  const key = (await call(gw.url, 'POST', '/sessions/human/keys', { key: gw.ownerKey })).body;
  return call(gw.url, 'POST', '/sessions', {
    key: gw.ownerKey,
    body: { humanGrant: await personGrant(key.actorKey, base) },
  });
}

test.before(async () => {
  merchant = await startMerchant({ amount: '100' });
});
test.after(async () => {
  await merchant.close();
  for (const s of servers) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

test(
  'session creation: an authority name that resolves to this machine is refused at connect ' + 'time, listener or not',
  async () => {
    const victim = await serve(recordsAll);
    const none = await freePort();
    const db = sqliteDb();
    const gw = await startTestGateway(db, {
      targets: { allowPrivate: false },
      resolve,
      humanAuthorities: [`http://auth.test:${victim.port}`, `http://auth.test:${none}`],
    });
    try {
      const listening = await askSession(gw, `http://auth.test:${victim.port}`);
      const silent = await askSession(gw, `http://auth.test:${none}`);
      assert.is(listening.body?.error?.code, 'revocation_unavailable', listening.text);
      assert.equal(
        [silent.status, silent.body.error],
        [listening.status, listening.body.error],
        'the same refusal whatever listens',
      );
      assert.is(victim.connections(), 0, 'the authority behind the name saw no connection');
    } finally {
      await gw.close();
      await db.drop();
    }
  },
);

test('a refusal never echoes what the authority answered: one text for every failure', async () => {
  const secret = 'internal-secret-7f3a';
  const answers = [
    await serve((_q, r) => r.writeHead(500, { 'content-type': 'text/plain' }).end(secret)),
    await serve((_q, r) => r.writeHead(200, { 'content-type': 'application/json' }).end(`{"${secret}": true`)),
    await serve((_q, r) => r.writeHead(302, { location: `http://127.0.0.1:1/${secret}` }).end()),
    await serve((_q, r) =>
      r.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ grantId: secret, revoked: false })),
    ),
    await serve((q, r) => q.socket.destroy()),
    await serve((_q, r) => r.writeHead(401, { 'www-authenticate': `Basic realm="${secret}"` }).end(secret)),
  ];
  const bases = [...answers.map((a) => `http://127.0.0.1:${a.port}`), `http://127.0.0.1:${await freePort()}`];
  const db = sqliteDb();
  // private addresses allowed: the authorities are reached
  const gw = await startTestGateway(db, { humanAuthorities: bases });
  try {
    const refusals = [];
    for (const base of bases) refusals.push(await askSession(gw, base));
    assert.ok(
      answers.every((a) => a.connections() > 0),
      'every authority was reached',
    );
    for (const r of refusals) {
      assert.is(r.body?.error?.code, 'revocation_unavailable', r.text);
      assert.not.match(r.text, secret);
      assert.equal([r.status, r.body.error], [refusals[0]!.status, refusals[0]!.body.error], r.text);
    }
  } finally {
    await gw.close();
    await db.drop();
  }
});

test(
  'before each payment, on another instance: the revocation request is guarded there ' +
    'too, and its refusal is the same text',
  async () => {
    const authority = await serve(recordsAll);
    const base = `http://auth.test:${authority.port}`;
    const db = sqliteDb();
    // Instance A may reach the authority (its host:port is an operator's exception); B may not.
    const a = await startTestGateway(db, {
      targets: { allowPrivate: false, allowHosts: [`auth.test:${authority.port}`, `127.0.0.1:${merchant.port}`] },
      resolve,
      humanAuthorities: [base],
    });
    const b = await startTestGateway(
      db,
      {
        targets: { allowPrivate: false, allowHosts: [`127.0.0.1:${merchant.port}`] },
        resolve,
        humanAuthorities: [base],
      },
      a.ownerKey,
    );
    try {
      const created = await askSession(a, base);
      assert.is(created.status, 201, created.text);
      const token = created.body.sessionToken;
      assert.is((await proxy(a, token, `${merchant.url}/a`, { purpose: 'api:search' })).status, 200, 'A pays');
      const paid = merchant.paid.length;
      const seen = authority.connections();
      const refused = await proxy(b, token, `${merchant.url}/b`, { purpose: 'api:search' });
      assert.is(refused.body?.error?.code, 'revocation_unavailable', refused.text);
      assert.match(refused.body.error.message, /the person's authority could not be asked about this grant$/);
      assert.is(merchant.paid.length, paid, 'nothing paid');
      assert.is(authority.connections(), seen, 'B never connected to the authority');
    } finally {
      await b.close();
      await a.close();
      await db.drop();
    }
  },
);

test(
  'an authority named by a private IP address is reached by the authority checks alone, ' + 'never through /proxy',
  async () => {
    const authority = await serve(recordsAll);
    const base = `http://127.0.0.1:${authority.port}`;
    const db = sqliteDb();
    const gw = await startTestGateway(db, {
      targets: { allowPrivate: false, allowHosts: [`127.0.0.1:${merchant.port}`] },
      humanAuthorities: [base],
    });
    try {
      const created = await askSession(gw, base);
      assert.is(created.status, 201, created.text);
      assert.is(
        (await proxy(gw, created.body.sessionToken, `${merchant.url}/p`, { purpose: 'api:search' })).status,
        200,
        'the person-backed session pays',
      );
      const seen = authority.connections();
      const s = await createSession(gw);
      const agent = await proxy(gw, s.sessionToken, `${base}/revoke?grantId=x`, { purpose: 'api:search' });
      assert.is(agent.status, 403, agent.text);
      assert.is(agent.body?.error?.code, 'target_not_allowed');
      assert.is(authority.connections(), seen, 'no agent request reached the authority');
    } finally {
      await gw.close();
      await db.drop();
    }
  },
);

test('the fetch the gateway hands the SDK refuses a JWKS URL whose name resolves to this machine', async () => {
  const jwks = await serve((_q, r) => r.writeHead(200, { 'content-type': 'application/json' }).end('{"keys":[]}'));
  const db = sqliteDb();
  const gw = await startTestGateway(db);
  const forwarder = createForwarder({ policy: { allowPrivate: false }, timeoutMs: 3000, maxRedirects: 0, resolve });
  try {
    const s = await createSession(gw);
    assert.is((await proxy(gw, s.sessionToken, `${merchant.url}/j`, { purpose: 'api:search' })).status, 200);
    const sba = (await call(gw.url, 'GET', `/sessions/${s.sessionId}/receipts`, { key: gw.ownerKey })).body.receipts[0]
      .sba;
    const v = await verifyCtl(sba, {
      amount: '100',
      currency: 'USD',
      merchantId: '127.0.0.1',
      jwksUrl: `http://jwks.test:${jwks.port}/.well-known/ctl-keys.json`,
      fetch: guardedFetch(forwarder),
    });
    assert.is(v.valid ? 'valid' : v.error.code, 'unknown_key');
    assert.is(jwks.connections(), 0, 'the JWKS server saw no connection');
  } finally {
    forwarder.close();
    await gw.close();
    await db.drop();
  }
});

test.run();
