/**
 * The x402 contracts written here, on anvil (gateway/dev/x402-chain.ts places them), refuse what
 * USDC and x402's upto proxy refuse: a used, cancelled, early, expired, malleable or foreign
 * EIP-3009 authorization; a receive called by anyone but the payee; a mint by anyone but the
 * minter; an upto settle by anyone but the permit's facilitator, above its maximum, before its
 * `validAfter`, or a second time (Permit2's nonce).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createWalletClient, defineChain, getAddress, http, parseAbi, toHex, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import {
  PERMIT2_ADDRESS,
  authorizationTypes,
  uptoPermit2WitnessTypes,
  x402UptoPermit2ProxyABI,
  x402UptoPermit2ProxyAddress,
} from '@x402/evm';
import { startAnvil, type Anvil } from '../helpers/anvil.js';
import { deployX402Chain, USDC_ABI, type X402Chain } from '../../gateway/dev/x402-chain.js';

const EIP3009_ABI = parseAbi([
  'function transferWithAuthorization(address, address, uint256, uint256, uint256, bytes32, bytes)',
  'function receiveWithAuthorization(address, address, uint256, uint256, uint256, bytes32, bytes)',
  'function cancelAuthorization(address authorizer, bytes32 nonce, bytes signature)',
]);
const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

let anvil: Anvil;
let chain: X402Chain;
const payer = privateKeyToAccount(generatePrivateKey());
const stranger = privateKeyToAccount(generatePrivateKey());
const PAYEE = '0x4444444444444444444444444444444444444444';

test.before(async () => {
  anvil = await startAnvil({ chainId: 84532 });
  chain = await deployX402Chain(anvil.url);
  await chain.mint(payer.address, 1_000_000n);
  await chain.approvePermit2(payer.address, 1_000_000n);
});
test.after(() => anvil?.stop());

const wallet = (key: Hex) =>
  createWalletClient({
    chain: defineChain({
      id: 84532,
      name: 'anvil',
      nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
      rpcUrls: { default: { http: [anvil.url] } },
    }),
    transport: http(anvil.url),
    account: privateKeyToAccount(key),
  });
/** Anvil's third account: pays gas for calls whose sender does not matter. */
const relayer = () => wallet(anvil.accounts[2]!.privateKey);

/** The revert reason of a call (simulated: nothing is mined), or undefined when it would succeed. */
async function reverts(f: () => Promise<unknown>): Promise<string | undefined> {
  try {
    await f();
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
}

async function authorization(o: { value?: bigint; validAfter?: bigint; validBefore?: bigint; signer?: typeof payer }) {
  const now = BigInt(Math.floor(Date.now() / 1000));
  const message = {
    from: payer.address,
    to: getAddress(PAYEE),
    value: o.value ?? 1000n,
    validAfter: o.validAfter ?? now - 600n,
    validBefore: o.validBefore ?? now + 600n,
    nonce: toHex(crypto.getRandomValues(new Uint8Array(32))),
  };
  const signature = await (o.signer ?? payer).signTypedData({
    domain: { name: 'USDC', version: '2', chainId: 84532, verifyingContract: chain.token.address },
    types: authorizationTypes,
    primaryType: 'TransferWithAuthorization',
    message,
  });
  const args = [
    message.from,
    message.to,
    message.value,
    message.validAfter,
    message.validBefore,
    message.nonce,
    signature,
  ] as const;
  return { message, signature, args };
}

const transfer = (args: readonly unknown[], as = relayer()) =>
  as.writeContract({
    address: chain.token.address,
    abi: EIP3009_ABI,
    functionName: 'transferWithAuthorization',
    args: args as any,
  });
const simulateTransfer = (args: readonly unknown[]) =>
  chain.client.simulateContract({
    address: chain.token.address,
    abi: EIP3009_ABI,
    functionName: 'transferWithAuthorization',
    args: args as any,
    account: anvil.accounts[2]!.address,
  });
const used = (nonce: Hex) =>
  chain.client.readContract({
    address: chain.token.address,
    abi: USDC_ABI,
    functionName: 'authorizationState',
    args: [payer.address, nonce],
  });

test('EIP-3009: an authorization moves once; used, expired, early, foreign or malleable ones are refused', async () => {
  const a = await authorization({});
  const before = await chain.balanceOf(PAYEE);
  await chain.client.waitForTransactionReceipt({ hash: await transfer(a.args) });
  assert.is((await chain.balanceOf(PAYEE)) - before, 1000n);
  assert.is(await used(a.message.nonce), true);
  assert.match((await reverts(() => simulateTransfer(a.args)))!, /authorization is used or canceled/);

  const now = BigInt(Math.floor(Date.now() / 1000));
  const expired = await authorization({ validBefore: now - 1n });
  assert.match((await reverts(() => simulateTransfer(expired.args)))!, /authorization is expired/);
  const early = await authorization({ validAfter: now + 3600n });
  assert.match((await reverts(() => simulateTransfer(early.args)))!, /authorization is not yet valid/);
  const foreign = await authorization({ signer: stranger });
  assert.match((await reverts(() => simulateTransfer(foreign.args)))!, /invalid signature/);
  // The same signature with s' = n - s (and v flipped) recovers the same signer: refused as USDC does.
  const fine = await authorization({});
  const sig = fine.signature.slice(2);
  const s = BigInt(`0x${sig.slice(64, 128)}`);
  const v = parseInt(sig.slice(128, 130), 16);
  const high = `0x${sig.slice(0, 64)}${(N - s).toString(16).padStart(64, '0')}${(v === 27 ? 28 : 27).toString(16)}`;
  const malleable = [...fine.args.slice(0, 6), high] as const;
  assert.match((await reverts(() => simulateTransfer(malleable)))!, /invalid signature/);
  assert.is(await reverts(() => simulateTransfer(fine.args)), undefined, 'the low-s original is fine');
  const more = await authorization({ value: 10n ** 12n });
  assert.match((await reverts(() => simulateTransfer(more.args)))!, /exceeds balance/);
});

test('EIP-3009: a cancelled authorization never moves; receive is for the payee; only the minter mints', async () => {
  const a = await authorization({});
  const cancel = await payer.signTypedData({
    domain: { name: 'USDC', version: '2', chainId: 84532, verifyingContract: chain.token.address },
    types: {
      CancelAuthorization: [
        { name: 'authorizer', type: 'address' },
        { name: 'nonce', type: 'bytes32' },
      ],
    },
    primaryType: 'CancelAuthorization',
    message: { authorizer: payer.address, nonce: a.message.nonce },
  });
  await chain.client.waitForTransactionReceipt({
    hash: await relayer().writeContract({
      address: chain.token.address,
      abi: EIP3009_ABI,
      functionName: 'cancelAuthorization',
      args: [payer.address, a.message.nonce, cancel],
    }),
  });
  assert.is(await used(a.message.nonce), true, 'cancelled counts as used');
  assert.match((await reverts(() => simulateTransfer(a.args)))!, /authorization is used or canceled/);

  const r = await authorization({});
  const receive = () =>
    chain.client.simulateContract({
      address: chain.token.address,
      abi: EIP3009_ABI,
      functionName: 'receiveWithAuthorization',
      args: r.args as any,
      account: anvil.accounts[2]!.address,
    });
  // Signed as a transfer, and sent by someone not the payee: refused on the caller first.
  assert.match((await reverts(receive))!, /caller must be the payee/);

  const mint = () =>
    chain.client.simulateContract({
      address: chain.token.address,
      abi: USDC_ABI,
      functionName: 'mint',
      args: [stranger.address, 1n],
      account: stranger.address,
    });
  assert.match((await reverts(mint))!, /caller is not a minter/);
});

test('upto proxy: only the named facilitator, at most the maximum, not early, once', async () => {
  const facilitator = anvil.accounts[3]!;
  const now = BigInt(Math.floor(Date.now() / 1000));
  const permit = async (validAfter = now - 600n) => {
    const message = {
      permitted: { token: chain.token.address, amount: 5000n },
      spender: getAddress(x402UptoPermit2ProxyAddress),
      nonce: BigInt(toHex(crypto.getRandomValues(new Uint8Array(16)))),
      deadline: now + 600n,
      witness: { to: getAddress(PAYEE), facilitator: getAddress(facilitator.address), validAfter },
    };
    const signature = await payer.signTypedData({
      domain: { name: 'Permit2', chainId: 84532, verifyingContract: PERMIT2_ADDRESS },
      types: uptoPermit2WitnessTypes,
      primaryType: 'PermitWitnessTransferFrom',
      message,
    });
    return { message, signature };
  };
  const settle = (p: Awaited<ReturnType<typeof permit>>, amount: bigint, as: `0x${string}`) =>
    chain.client.simulateContract({
      address: x402UptoPermit2ProxyAddress,
      abi: x402UptoPermit2ProxyABI,
      functionName: 'settle',
      args: [
        { permitted: p.message.permitted, nonce: p.message.nonce, deadline: p.message.deadline },
        amount,
        payer.address,
        p.message.witness,
        p.signature,
      ],
      account: as,
    });
  const p = await permit();
  assert.match((await reverts(() => settle(p, 1000n, anvil.accounts[2]!.address)))!, /UnauthorizedFacilitator/);
  assert.match((await reverts(() => settle(p, 5001n, facilitator.address)))!, /AmountExceedsPermitted/);
  assert.match(
    (await reverts(async () => settle(await permit(now + 3600n), 1n, facilitator.address)))!,
    /PaymentTooEarly/,
  );
  const before = await chain.balanceOf(PAYEE);
  const { request } = await settle(p, 1234n, facilitator.address);
  const hash = await wallet(facilitator.privateKey).writeContract(request);
  const mined = await chain.client.waitForTransactionReceipt({ hash });
  assert.is(mined.status, 'success');
  assert.is((await chain.balanceOf(PAYEE)) - before, 1234n, 'moved what was settled, to the witness');
  assert.ok(await reverts(() => settle(p, 1n, facilitator.address)), "a second settle: Permit2's nonce is used");
});

test.run();
