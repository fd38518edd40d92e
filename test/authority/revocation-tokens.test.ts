/**
 * Revocation tokens on a real EVM node (anvil), end to end through the authority: a grant
 * verifies with revocation read from the chain (`revocationSource`); revoking it at the authority
 * mints its token (the grant's hash) from CtlRevocationTokens, after which a verifier reading the
 * chain refuses `grant_revoked`; a revoked delegation link mints its revocation id and stops the
 * SBAs under it; a node that cannot answer is `revocation_unavailable`. The authority's log
 * checkpoint (the grants and revocations) is anchored on the same chain and listed at GET /admin/anchors.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPublicClient, http } from 'viem';
import {
  createDelegation,
  createSession,
  generateKeyPair,
  linkRevocationId,
  revocationTokenId,
  verifyCtl,
  type PolicyGrant,
} from '../../src/index.js';
import { createChainRevocationSource } from '../../service-kit/chain/revocation-source.js';
import { CTL_REVOCATION_TOKENS_ABI } from '../../service-kit/chain/contracts.js';
import type { ChainEvent } from '../../service-kit/anchor/index.js';
import { startAnvil, deployContract, type Anvil } from '../helpers/anvil.js';
import { freePort } from '../helpers/ports.js';
import { grantRequest, startTestAuthority, type TestAuthority } from './harness.js';

let anvil: Anvil;
let t: TestAuthority;
let tokens: `0x${string}`;
const dir = mkdtempSync(join(tmpdir(), 'ctl-revocation-tokens-'));
const events: ChainEvent[] = [];

test.before(async () => {
  anvil = await startAnvil();
  const signer = anvil.accounts[1]!;
  const anchor = await deployContract(anvil, 'CtlAnchor', [signer.address]);
  tokens = await deployContract(anvil, 'CtlRevocationTokens', [signer.address, 3600n]);
  writeFileSync(join(dir, 'anchor.key'), signer.privateKey, { mode: 0o600 });
  t = await startTestAuthority({
    env: {
      CTL_ANCHOR_EVM_RPC_URL: anvil.url,
      CTL_ANCHOR_EVM_CHAIN_ID: String(anvil.chainId),
      CTL_ANCHOR_EVM_CONTRACT: anchor,
      CTL_ANCHOR_EVM_REVOCATION_CONTRACT: tokens,
      CTL_ANCHOR_EVM_KEY_FILE: join(dir, 'anchor.key'),
      CTL_ANCHOR_EVM_ADDRESS: signer.address,
      CTL_ANCHOR_EVM_CONFIRMATIONS: '1',
    },
    anchorTiming: { pollMs: 1 },
    onChainEvent: (e) => events.push(e),
  });
});
test.after(async () => {
  await t?.close();
  await anvil.stop();
  rmSync(dir, { recursive: true, force: true });
});

const fetch = (url: string) => globalThis.fetch(url);
const source = () => createChainRevocationSource({ rpcUrl: anvil.url, contract: tokens, chainId: anvil.chainId });
/** A fresh verifier call that reads revocation from the chain only (no cache across calls: TTL 0). */
const verifyOnChain = (sba: unknown, revocationSource = source()) =>
  verifyCtl(sba, {
    amount: '10',
    currency: 'USD',
    jwksUrl: `${t.url}/.well-known/ctl-keys.json`,
    fetch,
    revocationSource,
    revocationTtl: 0,
  });
const onChain = (id: string) =>
  createPublicClient({ transport: http(anvil.url) }).readContract({
    address: tokens,
    abi: CTL_REVOCATION_TOKENS_ABI,
    functionName: 'tokenOf',
    args: [`0x${id}`],
  });

/** Runs the authority's chain outbox until no job is unconfirmed (the timer would, within a second). */
async function drain() {
  for (let i = 0; i < 20; i++) {
    await t.authority.chain.runOnce();
    const open = [
      ...(await t.authority.chain.list({ status: 'pending' })),
      ...(await t.authority.chain.list({ status: 'sent' })),
    ];
    if (open.length === 0) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error('the chain outbox did not drain');
}

test('revoke a grant: its token is minted, and a verifier reading the chain refuses grant_revoked', async () => {
  const agent = await generateKeyPair();
  const issued = await t.call('POST', '/grants', await grantRequest(t, agent.publicJwk));
  assert.is(issued.status, 201);
  const grant = issued.body as PolicyGrant;
  const s = createSession(grant, { actorId: 'agent', signingKey: agent.privateKeyPem, fetch });
  const sba = await s.createSba({ amount: '10', currency: 'USD', rail: 'x402' });
  const before = await verifyOnChain(sba);
  assert.ok(before.valid, JSON.stringify(!before.valid && before.error));

  const r = await t.call('POST', '/revoke', { grantId: grant.grantId });
  assert.is(r.status, 200, JSON.stringify(r.body));
  await drain();
  const id = revocationTokenId(grant);
  const [revokedAt, expiresAt] = await onChain(id);
  assert.ok(revokedAt > 0n, 'minted');
  assert.is(expiresAt, BigInt(Math.ceil(Date.parse(grant.expiresAt) / 1000)), 'the grant expiry recorded with it');
  const jobs = await t.authority.chain.list({ kind: 'revocation' });
  assert.equal(
    jobs.map((j) => [j.subject, j.status]),
    [[id, 'confirmed']],
  );
  assert.ok(events.some((e) => e.type === 'revocation.confirmed' && e.record.subject === id));

  const after = await verifyOnChain(sba);
  assert.is(!after.valid && after.error.code, 'grant_revoked');
  // Revoked again: nothing more is minted.
  await t.call('POST', '/revoke', { grantId: grant.grantId });
  await drain();
  assert.is((await t.authority.chain.list({ kind: 'revocation' })).length, 1);
});

test('revoke a delegation link: its revocation id is minted and the SBAs under it are refused', async () => {
  const agent = await generateKeyPair();
  const issued = await t.call(
    'POST',
    '/grants',
    await grantRequest(t, agent.publicJwk, { delegation: { maxDepth: 1 } }),
  );
  const root = issued.body as PolicyGrant;
  const sub = await generateKeyPair();
  const link = await createDelegation(
    root,
    { actorKey: sub.publicJwk, maxAmountMinor: '500', expiresAt: root.expiresAt },
    { signingKey: agent.privateKeyPem },
  );
  const s = createSession(link, { actorId: 'sub', signingKey: sub.privateKeyPem, fetch });
  const sba = await s.createSba({ amount: '10', currency: 'USD', rail: 'x402' });
  assert.ok((await verifyOnChain(sba)).valid);
  const r = await t.call('POST', '/revoke', { delegation: link });
  assert.is(r.status, 200, JSON.stringify(r.body));
  await drain();
  const [revokedAt] = await onChain(linkRevocationId(link));
  assert.ok(revokedAt > 0n);
  const after = await verifyOnChain(sba);
  assert.is(!after.valid && after.error.code, 'grant_revoked');
  assert.match(!after.valid ? after.error.message : '', /delegation .* is revoked/);
});

test('a node that cannot answer, or another chain, is revocation_unavailable (fail closed)', async () => {
  const agent = await generateKeyPair();
  const grant = (await t.call('POST', '/grants', await grantRequest(t, agent.publicJwk))).body as PolicyGrant;
  const sba = await createSession(grant, { actorId: 'a', signingKey: agent.privateKeyPem, fetch }).createSba({
    amount: '10',
    currency: 'USD',
    rail: 'x402',
  });
  const down = createChainRevocationSource({
    rpcUrl: `http://127.0.0.1:${await freePort()}`,
    contract: tokens,
    chainId: anvil.chainId,
  });
  const r = await verifyOnChain(sba, down);
  assert.is(!r.valid && r.error.code, 'revocation_unavailable');
  const other = createChainRevocationSource({ rpcUrl: anvil.url, contract: tokens, chainId: 1 });
  const r2 = await verifyOnChain(sba, other);
  assert.is(!r2.valid && r2.error.code, 'revocation_unavailable');
  // An address without the contract answers no bool.
  const empty = createChainRevocationSource({
    rpcUrl: anvil.url,
    contract: `0x${'00'.repeat(19)}01`,
    chainId: anvil.chainId,
  });
  const r3 = await verifyOnChain(sba, empty);
  assert.is(!r3.valid && r3.error.code, 'revocation_unavailable');
});

test("the log's checkpoint is anchored, its size and root the log's, and listed at /admin/anchors", async () => {
  const log = t.authority.log!.log;
  await log.publish(); // the grants and revocations above, in a signed checkpoint
  await t.authority.chain.runOnce({ readHeads: true });
  await drain();
  const listed = (await t.call('GET', '/admin/anchors?kind=anchor')).body;
  const { origin, source, head, checkpoint } = listed.logs[0];
  assert.is(origin, log.origin);
  assert.match(origin, /\/ctl-authority-log$/);
  assert.is(source, 'checkpoint');
  assert.equal(listed.jobs[0].job, { kind: 'anchor', head, source: 'checkpoint', checkpoint });
  assert.is(listed.jobs[0].status, 'confirmed');
  assert.ok(listed.jobs[0].txid);
  // What was anchored is the log's: the checkpoint it serves, and its tree at that size.
  const served = await (await globalThis.fetch(`${t.url}/log/checkpoint`)).text();
  assert.is(checkpoint, served);
  assert.is(head.size, (await log.tree()).size);
  assert.is((await log.rootAt(head.size)).toString('hex'), head.root);
  const metrics = await (await globalThis.fetch(`${t.url}/metrics`)).text();
  assert.match(metrics, /ctl_authority_chain_jobs_confirmed_total\{chain="evm",kind="anchor"\} [1-9]/);
  assert.match(metrics, /ctl_authority_chain_jobs_confirmed_total\{chain="evm",kind="revocation"\} [1-9]/);
  assert.match(
    metrics,
    new RegExp(`ctl_authority_anchor_confirmed_size\\{chain="evm",origin="${origin}"\\} ${head.size}`),
  );
});

test.run();
