/**
 * `ctl human keygen | grant | revoke` through the real binary (PROTOCOL.md §10); the two-step
 * grant against the real authority is in examples/human-agent (examples.test.ts).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as CTL from '../../src/index.js';
import { runCtl } from '../helpers/run-ctl.js';

const dir = mkdtempSync(join(tmpdir(), 'ctl-human-cli-'));
const f = (name: string) => join(dir, name);

const ctl = (...args: string[]) => runCtl({ cwd: dir }, 'human', ...args);

test('help, unknown subcommand and unknown flags', async () => {
  const help = await ctl('--help');
  assert.is(help.code, 0);
  assert.match(help.out, /ctl human keygen/);
  assert.is((await ctl('grant', '--help')).code, 0);
  const none = await ctl();
  assert.is(none.code, 2);
  const unknown = await ctl('sign');
  assert.is(unknown.code, 2);
  assert.match(unknown.err, /unknown subcommand sign/);
  const flag = await ctl('keygen', '--out', f('x.pem'), '--colour');
  assert.is(flag.code, 2);
  assert.match(flag.err, /unknown option --colour/);
});

test('keygen prints the DID and writes the key 0600; never overwrites without --force', async () => {
  for (const [alg, prefix] of [
    ['EdDSA', 'did:key:z6Mk'],
    ['ES256', 'did:key:zDn'],
  ] as const) {
    const file = f(`${alg}.key.pem`);
    const r = await ctl('keygen', '--out', file, '--alg', alg);
    assert.is(r.code, 0, r.err);
    const did = r.out.trim();
    assert.ok(did.startsWith(prefix), did);
    assert.is(statSync(file).mode & 0o777, 0o600);
    const signer = await CTL.importSigningKey(readFileSync(file, 'utf8'));
    assert.is(CTL.didKeyFromJwk(signer.publicJwk), did, 'the DID is the key in the file');
    const again = await ctl('keygen', '--out', file);
    assert.is(again.code, 1);
    assert.match(again.err, /exists; pass --force/);
    assert.is((await ctl('keygen', '--out', file, '--force')).code, 0);
  }
  assert.is((await ctl('keygen', '--out', f('z.pem'), '--alg', 'RS256')).code, 2);
});

test('grant signed alone (--revocation-base) verifies for a merchant trusting the DID; bad input exits 2', async () => {
  const did = (await ctl('keygen', '--out', f('p.key.pem'))).out.trim();
  const agent = await CTL.generateKeyPair();
  writeFileSync(f('agent.json'), JSON.stringify({ publicJwk: agent.publicJwk }));
  const r = await ctl(
    'grant',
    '--key',
    f('p.key.pem'),
    '--agent',
    f('agent.json'),
    '--amount',
    '2000',
    '--currency',
    'EUR',
    '--purpose',
    'travel:booking',
    '--merchant',
    'hotel.example',
    '--expires',
    '2h',
    '--revocation-base',
    'https://people.example',
    '--out',
    f('grant.json'),
  );
  assert.is(r.code, 0, r.err);
  assert.match(r.err, /grant grant_\S+: 20.00 EUR for travel:booking/);
  const grant = CTL.parseGrant(readFileSync(f('grant.json'), 'utf8'));
  assert.is(grant.issuer, did);
  assert.equal(grant.destinationAllowlist, ['hotel.example']);
  assert.match(grant.revocationUrl, /^https:\/\/people\.example\/revoke\?grantId=grant_/);
  const sba = await CTL.createSignedSessionBudgetAuthorization(
    {
      grant,
      sessionId: 's',
      actorId: 'a',
      maxAmountMinor: '900',
      merchantId: 'hotel.example',
      rail: 'x402',
      purpose: 'travel:booking',
    },
    { signingKey: agent.privateKeyPem },
  );
  const v = await CTL.verifyCtl(sba, {
    amount: '900',
    currency: 'EUR',
    merchantId: 'hotel.example',
    rail: 'x402',
    purpose: 'travel:booking',
    trustedHumans: [did],
    offline: true,
  });
  assert.ok(v.valid, JSON.stringify(v));
  // The merchant's command line: ctl verify --trusted-human, the intent recomputed from the payment.
  writeFileSync(f('sba.json'), JSON.stringify(sba));
  const verify = (...extra: string[]) =>
    runCtl(
      { cwd: dir },
      'verify',
      f('sba.json'),
      '--merchant',
      'hotel.example',
      '--rail',
      'x402',
      '--purpose',
      'travel:booking',
      '--explain',
      ...extra,
    );
  const ok = await verify('--trusted-human', did);
  assert.is(ok.code, 0, ok.out);
  assert.match(ok.out, /a person trusted by --trusted-human/);
  const untrusted = await verify('--trusted-human', CTL.didKeyFromJwk(agent.publicJwk));
  assert.is(untrusted.code, 1);
  assert.match(untrusted.out, /✗ 1\. PolicyGrant signature[\s\S]*issuer_not_trusted/);
  const wrongIntent = await verify('--trusted-human', did, '--amount', '800');
  assert.is(wrongIntent.code, 1);
  assert.match(wrongIntent.out, /REFUSED: amount_exceeds_authorization/);
  // The agent given as its did:key works too.
  const byDid = await ctl(
    'grant',
    '--key',
    f('p.key.pem'),
    '--agent',
    CTL.didKeyFromJwk(agent.publicJwk),
    '--amount',
    '1',
    '--currency',
    'EUR',
    '--purpose',
    'travel:booking',
    '--expires',
    '2026-12-31T00:00:00Z',
    '--revocation-base',
    'https://people.example',
  );
  assert.is(byDid.code, 0, byDid.err);
  assert.equal(JSON.parse(byDid.out).actorKey, agent.publicJwk);
  for (const bad of [
    ['--agent', f('missing.pem')],
    ['--expires', 'tomorrow'],
    ['--purpose', 'travel:booking', '--authority', 'http://127.0.0.1:9'],
  ]) {
    const args = [
      'grant',
      '--key',
      f('p.key.pem'),
      '--agent',
      f('agent.json'),
      '--amount',
      '1',
      '--currency',
      'EUR',
      '--purpose',
      'travel:booking',
      '--expires',
      '1h',
      '--revocation-base',
      'https://p.example',
    ];
    for (let i = 0; i < bad.length; i += 2) {
      const at = args.indexOf(bad[i]!);
      if (at >= 0 && bad[i] !== '--purpose') args[at + 1] = bad[i + 1]!;
      else args.push(bad[i]!, bad[i + 1]!);
    }
    const res = await ctl(...args);
    assert.is(res.code, 2, `${bad.join(' ')}: ${res.err}`);
  }
  const badAmount = await ctl(
    'grant',
    '--key',
    f('p.key.pem'),
    '--agent',
    f('agent.json'),
    '--amount',
    '20.00',
    '--currency',
    'EUR',
    '--purpose',
    'travel:booking',
    '--expires',
    '1h',
    '--revocation-base',
    'https://p.example',
  );
  assert.is(badAmount.code, 1);
  assert.match(badAmount.err, /maxAmountMinor/);
});

test(
  'revoke --print signs a fresh ctl-revocation/1; revoke against an unreachable authority ' + 'is one line, exit 1',
  async () => {
    await ctl('keygen', '--out', f('r.key.pem'));
    const r = await ctl('revoke', '--key', f('r.key.pem'), '--grant', f('grant.json'), '--print');
    assert.is(r.code, 0, r.err);
    const rev = JSON.parse(r.out);
    const v = await CTL.verifySignedRevocation(rev);
    assert.ok(v.valid, JSON.stringify(v));
    const down = await ctl(
      'revoke',
      '--key',
      f('r.key.pem'),
      '--grant-id',
      'grant_x',
      '--authority',
      'http://127.0.0.1:9',
    );
    assert.is(down.code, 1);
    assert.match(down.err, /^ctl human revoke: POST http:\/\/127\.0\.0\.1:9\/revoke: /);
    assert.is(down.err.trim().split('\n').length, 1);
  },
);

test.after(() => rmSync(dir, { recursive: true, force: true }));
test.run();
