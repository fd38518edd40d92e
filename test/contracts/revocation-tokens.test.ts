/**
 * CtlRevocationTokens on anvil: only the authority mints and burns; a mint is idempotent (the
 * first times stay, a retried mint changes nothing); nothing un-revokes a live artifact: a token
 * burns only once its recorded expiry plus the grace has passed on the chain's clock.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createPublicClient, createWalletClient, http, defineChain, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { startAnvil, deployContract, type Anvil } from '../helpers/anvil.js';
import { CTL_REVOCATION_TOKENS_ABI } from '../../service-kit/chain/contracts.js';

let anvil: Anvil;
let tokens: Hex;
const GRACE = 3600n;

test.before(async () => {
  anvil = await startAnvil();
  tokens = await deployContract(anvil, 'CtlRevocationTokens', [anvil.accounts[1]!.address, GRACE]);
});
test.after(() => anvil.stop());

const chain = () =>
  defineChain({
    id: anvil.chainId,
    name: 'anvil',
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [anvil.url] } },
  });
const as = (i: number) =>
  createWalletClient({
    chain: chain(),
    transport: http(anvil.url),
    account: privateKeyToAccount(anvil.accounts[i]!.privateKey),
  });
const pub = () => createPublicClient({ chain: chain(), transport: http(anvil.url) });
const read = (functionName: 'isRevoked' | 'tokenOf', id: Hex) =>
  pub().readContract({
    address: tokens,
    abi: CTL_REVOCATION_TOKENS_ABI,
    functionName,
    args: [id],
  } as never) as Promise<unknown>;
const write = async (i: number, functionName: 'mint' | 'burn', args: readonly unknown[]) => {
  const hash = await as(i).writeContract({
    address: tokens,
    abi: CTL_REVOCATION_TOKENS_ABI,
    functionName,
    args,
  } as never);
  // anvil mines at once, but the receipt can trail the hash on a loaded machine: wait for it.
  return pub().waitForTransactionReceipt({ hash, pollingInterval: 50, timeout: 20_000 });
};
const refused = (p: Promise<unknown>, error: RegExp) =>
  p.then(
    () => assert.unreachable(`expected ${error}`),
    (e: Error) => assert.match(e.message, error),
  );
const now = async () => (await pub().getBlock()).timestamp;

test('only the authority mints; a mint is idempotent and keeps its first times', async () => {
  const id = `0x${'11'.repeat(32)}` as Hex;
  const expires = (await now()) + 86_400n;
  await refused(write(2, 'mint', [id, expires]), /NotAuthority/);
  assert.is(await read('isRevoked', id), false);
  const first = await write(1, 'mint', [id, expires]);
  assert.is(first.logs.length, 1, 'Minted');
  assert.is(await read('isRevoked', id), true);
  const [revokedAt, expiresAt] = (await read('tokenOf', id)) as [bigint, bigint];
  assert.is(expiresAt, expires);
  const again = await write(1, 'mint', [id, expires + 999_999n]);
  assert.is(again.logs.length, 0, 'no second Minted event');
  assert.equal(await read('tokenOf', id), [revokedAt, expires], 'the first times stay');
});

test('a token burns only once its expiry plus the grace passed, and only by the authority', async () => {
  const id = `0x${'22'.repeat(32)}` as Hex;
  const expires = (await now()) + 100n;
  await write(1, 'mint', [id, expires]);
  await refused(write(1, 'burn', [`0x${'33'.repeat(32)}`]), /NotMinted/);
  await refused(write(1, 'burn', [id]), /NotExpired/);
  await anvil.rpc('evm_increaseTime', [200]); // expired, but within the grace
  await anvil.mine(1);
  await refused(write(1, 'burn', [id]), /NotExpired/);
  await anvil.rpc('evm_increaseTime', [Number(GRACE)]);
  await anvil.mine(1);
  await refused(write(2, 'burn', [id]), /NotAuthority/);
  const burnt = await write(1, 'burn', [id]);
  assert.is(burnt.status, 'success');
  assert.is(await read('isRevoked', id), false);
  assert.equal(await read('tokenOf', id), [0n, 0n]);
});

test.run();
