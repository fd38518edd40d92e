/**
 * `ctl anchor verify` as an operator runs it, against the authority anchoring its log's signed
 * checkpoint on anvil and (where installed) litecoind: the served checkpoint verifies on both
 * chains; a checkpoint that grew since verifies through the earlier anchor by the log's
 * consistency proof; a grant walks inclusion → checkpoint → anchor, and one logged after the
 * newest anchor is not anchored yet; a checkpoint signed by the log's key but inconsistent with the
 * anchored one (a split view), or with another root for the anchored size, or not signed by the
 * pinned key, is refused (exit 1); no chain configured, no verifier key or no admin key where one
 * is needed is a usage error (exit 2). `ctl anchor deploy` deploys CtlAnchor with the configured signer.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAnvil, deployContract, type Anvil } from '../helpers/anvil.js';
import { litecoindPath, startLitecoind, LITECOIND_MISSING, type Litecoind } from '../helpers/litecoind.js';
import { runCtl } from '../helpers/run-ctl.js';
import { ADMIN_KEY, grantRequest, startTestAuthority, type TestAuthority } from '../authority/harness.js';
import { generateNoteSigner, type NoteSigner } from '../../service-kit/tlog/index.js';
import { signCheckpoint } from '../../src/entries/log.js';
import { generateKeyPair } from '../../src/index.js';

const ORIGIN = 'authority.test/ctl-authority-log';
const dir = mkdtempSync(join(tmpdir(), 'ctl-anchor-cli-'));
let anvil: Anvil;
let ltc: Litecoind | undefined;
let t: TestAuthority;
let logKey: NoteSigner;
let verifierEnv: Record<string, string>;
const keyFile = join(dir, 'admin.key');
const vkeyFile = join(dir, 'log.vkey');

test.before(async () => {
  anvil = await startAnvil();
  if (litecoindPath()) ltc = await startLitecoind();
  else console.log(LITECOIND_MISSING, '(the EVM half runs)');
  const signer = anvil.accounts[1]!;
  const contract = await deployContract(anvil, 'CtlAnchor', [signer.address]);
  writeFileSync(join(dir, 'anchor.key'), signer.privateKey, { mode: 0o600 });
  writeFileSync(keyFile, ADMIN_KEY);
  // The log's key is known here only to forge a checkpoint it signs (a split view).
  logKey = await generateNoteSigner(ORIGIN);
  writeFileSync(vkeyFile, logKey.vkey);
  const evm = {
    CTL_ANCHOR_EVM_RPC_URL: anvil.url,
    CTL_ANCHOR_EVM_CHAIN_ID: String(anvil.chainId),
    CTL_ANCHOR_EVM_CONTRACT: contract,
    CTL_ANCHOR_EVM_ADDRESS: signer.address,
    CTL_ANCHOR_EVM_CONFIRMATIONS: '1',
  };
  const btc: Record<string, string> = ltc
    ? {
        CTL_ANCHOR_BTC_RPC_URL: ltc.url,
        CTL_ANCHOR_BTC_RPC_USER: ltc.user,
        CTL_ANCHOR_BTC_RPC_PASSWORD: ltc.password,
        CTL_ANCHOR_BTC_ADDRESS: ltc.address,
        CTL_ANCHOR_BTC_CONFIRMATIONS: '1',
      }
    : {};
  t = await startTestAuthority({
    env: {
      ...evm,
      CTL_ANCHOR_EVM_KEY_FILE: join(dir, 'anchor.key'),
      ...btc,
      ...(ltc ? { CTL_ANCHOR_BTC_WALLET: ltc.wallet, CTL_ANCHOR_BTC_FEE_RATE: '2' } : {}),
      CTL_AUTHORITY_LOG_PRIVATE_KEY: logKey.skey,
    },
    // Heads are read when a test asks (runOnce({ readHeads: true })), never behind its back.
    anchorTiming: { pollMs: 1, anchorIntervalMs: 3_600_000 },
  });
  verifierEnv = { ...evm, ...btc };
});
test.after(async () => {
  await t?.close();
  await anvil?.stop();
  await ltc?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Issues a grant (a log entry) and signs a checkpoint of it; resolves to the grant. */
async function issueGrant() {
  const agent = await generateKeyPair();
  const r = await t.call('POST', '/grants', await grantRequest(t, agent.publicJwk));
  assert.is(r.status, 201, JSON.stringify(r.body));
  await t.authority.log!.log.publish();
  return r.body as { grantId: string } & Record<string, unknown>;
}

/** Anchors the current checkpoint on every chain and waits until each is confirmed. */
async function anchorNow() {
  await t.authority.log!.log.publish();
  await t.authority.chain.runOnce({ readHeads: true });
  for (let i = 0; i < 50; i++) {
    await ltc?.mine(1);
    await t.authority.chain.runOnce();
    const open = [
      ...(await t.authority.chain.list({ status: 'pending' })),
      ...(await t.authority.chain.list({ status: 'sent' })),
    ];
    if (open.length === 0) return;
  }
  throw new Error('anchors not confirmed');
}

const verify = (...args: string[]) => runCtl({ cwd: dir, env: verifierEnv }, 'anchor', 'verify', ...args);
const service = () => ['--service', t.url, '--admin-key-file', keyFile, '--vkey', `@${vkeyFile}`];

/** A checkpoint of the log signed with its key: `size` entries, `root` (64 hex). */
async function signed(size: number, root: string) {
  const file = join(dir, `checkpoint-${size}-${root.slice(0, 8)}.txt`);
  writeFileSync(
    file,
    await signCheckpoint({ origin: ORIGIN, size, rootHash: Buffer.from(root, 'hex') }, [logKey.note!]),
  );
  return file;
}

test('the served checkpoint verifies on every configured chain', async () => {
  await issueGrant();
  await anchorNow();
  const r = await verify(...service());
  assert.is(r.code, 0, r.out + r.err);
  assert.match(r.out, /authority\.test\/ctl-authority-log size \d+ root [0-9a-f]{64} \(checkpoint\)/);
  assert.match(r.out, /the served checkpoint: signed by authority\.test\/ctl-authority-log/);
  assert.match(r.out, /evm: ok: anchored size \d+ in 0x[0-9a-f]{64}/);
  if (ltc) assert.match(r.out, /btc: ok: anchored size \d+ in [0-9a-f]{64}/);
  // The records say what was anchored: the log's checkpoint, its signed note kept with it.
  const jobs = (await t.call('GET', '/admin/anchors?kind=anchor')).body.jobs;
  assert.ok(jobs.every((j: any) => j.job.source === 'checkpoint' && j.job.checkpoint.startsWith(`${ORIGIN}\n`)));
});

test("a checkpoint that grew since verifies through the earlier anchor, by the log's consistency proof", async () => {
  const anchored = (await t.call('GET', '/admin/anchors?kind=anchor')).body.jobs[0].job.head;
  await issueGrant();
  const r = await verify(...service(), '--json');
  assert.is(r.code, 0, r.out + r.err);
  const out = JSON.parse(r.out);
  assert.is(out.head.size, anchored.size + 1);
  for (const c of out.checks) assert.is(c.anchor.size, anchored.size, c.chain);
});

test('a grant walks inclusion → checkpoint → anchor; one logged after the newest anchor is not yet', async () => {
  const late = await issueGrant();
  const file = join(dir, 'grant.json');
  writeFileSync(file, JSON.stringify(late)); // the signed grant as its holder got it
  const before = await verify(...service(), '--grant', file);
  assert.is(before.code, 1, before.out + before.err);
  assert.match(
    before.out,
    new RegExp(`grant ${late.grantId}: entry \\d+ of ${ORIGIN}, included in the tree of size \\d+`),
  );
  assert.match(before.out, /evm: REFUSED: the newest anchor \(size \d+\) does not cover entry \d+ yet/);
  await anchorNow();
  const after = await verify(...service(), '--grant', file);
  assert.is(after.code, 0, after.out + after.err);
  assert.match(after.out, /evm: ok: anchored size \d+/);
});

test('a checkpoint the log signed, inconsistent with the anchored one (split view), is refused (exit 1)', async () => {
  const anchored = (await t.call('GET', '/admin/anchors?kind=anchor')).body.jobs[0].job.head;
  await issueGrant();
  const size = (await t.authority.log!.log.tree()).size;
  assert.ok(size > anchored.size);
  const split = await signed(size, 'ab'.repeat(32));
  const r = await verify(...service(), '--checkpoint', split);
  assert.is(r.code, 1, r.out + r.err);
  assert.match(r.out, /checkpoint: signed by authority\.test\/ctl-authority-log/);
  assert.match(
    r.out,
    /evm: REFUSED: the anchored head \(size \d+, root [0-9a-f]{64}\) is not part of this log: log_proof_invalid/,
  );
  if (ltc) assert.match(r.out, /btc: REFUSED: the anchored head .* is not part of this log/);
  // The real checkpoint of that size verifies, through the same proof.
  const real = await signed(size, (await t.authority.log!.log.rootAt(size)).toString('hex'));
  const ok = await verify(...service(), '--checkpoint', real);
  assert.is(ok.code, 0, ok.out + ok.err);
});

test('another root for the anchored size, or a checkpoint the pinned key did not sign: refused (exit 1)', async () => {
  const head = (await t.call('GET', '/admin/anchors?kind=anchor')).body.jobs[0].job.head;
  const other = await signed(head.size, '07'.repeat(32));
  const r = await verify(...service(), '--checkpoint', other);
  assert.is(r.code, 1, r.out + r.err);
  assert.match(r.out, /evm: REFUSED: the chain anchors size \d+ .* with root/);
  // Unsigned: the pinned key refuses it; the chains alone refuse its root too.
  const forged = join(dir, 'forged.txt');
  writeFileSync(forged, `${head.origin}\n${head.size}\n${Buffer.alloc(32, 7).toString('base64')}\n`);
  const alone = await verify('--checkpoint', forged, '--vkey', `@${vkeyFile}`);
  assert.is(alone.code, 1, alone.out + alone.err);
  assert.match(alone.out, /checkpoint: REFUSED: /);
  assert.match(alone.out, /evm: REFUSED: the chain anchors size/);
});

test('usage: no chain configured, no verifier key, a malformed variable (exit 2)', async () => {
  const none = await runCtl({ cwd: dir, env: {} }, 'anchor', 'verify', ...service());
  assert.is(none.code, 2);
  assert.match(none.err, /no chain to check: set CTL_ANCHOR_EVM_\* or CTL_ANCHOR_BTC_\*/);
  const novkey = await verify('--service', t.url);
  assert.is(novkey.code, 2);
  assert.match(novkey.err, /give the log's verifier key \(--vkey/);
  const nokey = await verify('--admin-key-file', keyFile);
  assert.is(nokey.code, 2);
  assert.match(nokey.err, /--admin-key-file goes with --service/);
  const badChain = await runCtl(
    { cwd: dir, env: { ...verifierEnv, CTL_ANCHOR_EVM_CHAIN_ID: 'x' } },
    'anchor',
    'verify',
  );
  assert.is(badChain.code, 2);
  assert.match(badChain.err, /CTL_ANCHOR_EVM_CHAIN_ID: expected an integer/);
});

test('ctl anchor deploy deploys CtlAnchor with the configured signer and prints the variable', async () => {
  const r = await runCtl(
    {
      cwd: dir,
      env: {
        CTL_ANCHOR_EVM_RPC_URL: anvil.url,
        CTL_ANCHOR_EVM_CHAIN_ID: String(anvil.chainId),
        CTL_ANCHOR_EVM_KEY_FILE: join(dir, 'anchor.key'),
      },
    },
    'anchor',
    'deploy',
    'anchor',
  );
  assert.is(r.code, 0, r.out + r.err);
  const address = /CTL_ANCHOR_EVM_CONTRACT=(0x[0-9a-fA-F]{40})/.exec(r.out)?.[1];
  assert.ok(address, r.out);
  const code = await anvil.rpc<string>('eth_getCode', [address, 'latest']);
  assert.ok(code.length > 100, 'a contract is there');
});

test.run();
