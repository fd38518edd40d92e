/**
 * `ctl anchor verify` as an operator runs it, against the authority anchoring its audit head on
 * anvil and (where installed) litecoind: the current head verifies on both chains; a head that grew
 * since verifies through an earlier anchor the service's log holds; a checkpoint whose root differs
 * from the anchored one is refused (exit 1); no chain configured or no admin key is a usage error
 * (exit 2). `ctl anchor deploy` deploys CtlAnchor with the configured signer.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAnvil, deployContract, type Anvil } from '../helpers/anvil.js';
import { litecoindPath, startLitecoind, LITECOIND_MISSING, type Litecoind } from '../helpers/litecoind.js';
import { runCtl } from '../helpers/run-ctl.js';
import { ADMIN_KEY, startTestAuthority, type TestAuthority } from '../authority/harness.js';

const dir = mkdtempSync(join(tmpdir(), 'ctl-anchor-cli-'));
let anvil: Anvil;
let ltc: Litecoind | undefined;
let t: TestAuthority;
let verifierEnv: Record<string, string>;
const keyFile = join(dir, 'admin.key');

test.before(async () => {
  anvil = await startAnvil();
  if (litecoindPath()) ltc = await startLitecoind();
  else console.log(LITECOIND_MISSING, '(the EVM half runs)');
  const signer = anvil.accounts[1]!;
  const contract = await deployContract(anvil, 'CtlAnchor', [signer.address]);
  writeFileSync(join(dir, 'anchor.key'), signer.privateKey, { mode: 0o600 });
  writeFileSync(keyFile, ADMIN_KEY);
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
    },
    anchorTiming: { pollMs: 1 },
  });
  verifierEnv = { ...evm, ...btc };
});
test.after(async () => {
  await t?.close();
  await anvil?.stop();
  await ltc?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Anchors the current head on every chain and waits until each is confirmed. */
async function anchorNow() {
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

test('the current head verifies on every configured chain', async () => {
  await t.call('POST', '/policies', { policy: { cli: 1 } });
  await anchorNow();
  const r = await verify('--service', t.url, '--admin-key-file', keyFile);
  assert.is(r.code, 0, r.out + r.err);
  assert.match(r.out, /authority\.test\/ctl-authority-audit size \d+ root [0-9a-f]{64}/);
  assert.match(r.out, /evm: ok: anchored size \d+ in 0x[0-9a-f]{64}/);
  if (ltc) assert.match(r.out, /btc: ok: anchored size \d+ in [0-9a-f]{64}/);
});

test('a head that grew since verifies through the earlier anchor its log holds', async () => {
  const anchored = (await t.call('GET', '/admin/anchors')).body.logs[0].head;
  await t.call('POST', '/policies', { policy: { cli: 2 } });
  const r = await verify('--service', t.url, '--admin-key-file', keyFile, '--json');
  assert.is(r.code, 0, r.out + r.err);
  const out = JSON.parse(r.out);
  assert.is(out.head.size, anchored.size + 1);
  for (const c of out.checks) assert.is(c.anchor.size, anchored.size, c.chain);
});

test('a checkpoint with another root for the anchored size is refused (exit 1)', async () => {
  const head = (await t.call('GET', '/admin/anchors?kind=anchor')).body.jobs[0].job.head;
  const forged = `${head.origin}\n${head.size}\n${Buffer.alloc(32, 7).toString('base64')}\n`;
  writeFileSync(join(dir, 'checkpoint.txt'), forged);
  const r = await verify('--checkpoint', join(dir, 'checkpoint.txt'), '--service', t.url, '--admin-key-file', keyFile);
  assert.is(r.code, 1, r.out + r.err);
  assert.match(r.out, /service: REFUSED: the service log does not hold this head/);
  assert.match(r.out, /evm: REFUSED: the chain anchors size \d+ .* with root/);
  // Without the service, the chains alone refuse it too.
  const alone = await verify('--checkpoint', join(dir, 'checkpoint.txt'));
  assert.is(alone.code, 1, alone.out + alone.err);
  assert.match(alone.out, /evm: REFUSED/);
});

test('usage: no chain configured, no admin key, a malformed variable (exit 2)', async () => {
  const none = await runCtl({ cwd: dir, env: {} }, 'anchor', 'verify', '--service', t.url, '--admin-key-file', keyFile);
  assert.is(none.code, 2);
  assert.match(none.err, /no chain to check: set CTL_ANCHOR_EVM_\* or CTL_ANCHOR_BTC_\*/);
  const nokey = await verify('--service', t.url);
  assert.is(nokey.code, 2);
  assert.match(nokey.err, /--service needs --admin-key-file/);
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
