/**
 * The `upto` fixture the gateway pays against: the stock x402 `upto` client scheme (@x402/evm)
 * pays a stock @x402/express merchant (stock `upto` server scheme) through the stock facilitator
 * (stock `upto` facilitator scheme) on the in-memory ledger's Permit2. The merchant authorizes a
 * maximum and settles what was used: exactly that moves, and PAYMENT-RESPONSE says how much.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { x402Client, x402HTTPClient } from '@x402/core/client';
import type { PaymentRequired, PaymentPayload } from '@x402/core/types';
import { UptoEvmScheme } from '@x402/evm/upto/client';
import { createEvmLedger, BASE_SEPOLIA_USDC, type EvmLedger } from '../../../gateway/dev/evm-ledger.js';
import { decodeFunctionData, getAddress } from 'viem';
import { PERMIT2_ABI, PERMIT2_ADDRESS, UPTO_PROXY_ADDRESS, UPTO_PROXY_ABI } from '../../../gateway/dev/permit2.js';
import { startFacilitator, type Listening } from '../../../gateway/dev/x402-merchants.js';
import { startUptoMerchant, type UptoMerchant } from '../../../gateway/dev/x402-upto-merchant.js';

const PAYEE = '0x4444444444444444444444444444444444444444';
const USDC = BASE_SEPOLIA_USDC.address.toLowerCase();
const MAX = 50_000n; // the merchant's $0.05
const FUNDS = 1_000_000n;

let ledger: EvmLedger;
let facilitator: Listening;
let merchant: UptoMerchant;

test.before(async () => {
  ledger = createEvmLedger();
  facilitator = await startFacilitator(ledger);
  merchant = await startUptoMerchant({ facilitatorUrl: facilitator.url, payTo: PAYEE });
});
test.after(async () => {
  await merchant.close();
  await facilitator.close();
});

/** A funded payer that approved Permit2 for `allowance` (its one on-chain step), with the stock client. */
function payer(allowance = FUNDS) {
  const account = privateKeyToAccount(generatePrivateKey());
  ledger.mint(account.address, FUNDS);
  ledger.approve(account.address, PERMIT2_ADDRESS, allowance);
  const http = new x402HTTPClient(new x402Client().register('eip155:84532', new UptoEvmScheme(account)));
  return { account, http };
}

async function reverts(f: () => Promise<unknown>, reason: RegExp) {
  try {
    await f();
  } catch (e) {
    assert.match((e as Error).message, reason);
    return;
  }
  assert.unreachable(`no revert (${reason})`);
}

async function terms(path: string) {
  const res = await fetch(`${merchant.url}${path}`);
  assert.is(res.status, 402);
  return new x402HTTPClient(new x402Client()).getPaymentRequiredResponse((n) => res.headers.get(n));
}

async function pay(http: x402HTTPClient, path: string, tamper?: (p: PaymentPayload) => void) {
  const required: PaymentRequired = await terms(path);
  const payload = await http.createPaymentPayload(required);
  tamper?.(payload);
  const headers = http.encodePaymentSignatureHeader(payload);
  const res = await fetch(`${merchant.url}${path}`, { headers });
  const settlement = res.headers.get('payment-response')
    ? http.getPaymentSettleResponse((n) => res.headers.get(n))
    : undefined;
  return { res, body: await res.json().catch(() => null), settlement, payload, headers };
}

test('terms: scheme upto, the maximum as amount, Permit2 as transfer method, the facilitator named', async () => {
  const required = await terms('/metered?units=12');
  assert.is(required.x402Version, 2);
  assert.is(required.accepts.length, 1);
  const r = required.accepts[0];
  assert.is(r.scheme, 'upto');
  assert.is(r.network, 'eip155:84532');
  assert.is(r.amount, MAX.toString());
  assert.is(r.asset.toLowerCase(), USDC);
  assert.is(r.payTo, PAYEE);
  assert.ok(r.maxTimeoutSeconds > 0);
  assert.is(r.extra.assetTransferMethod, 'permit2');
  assert.is(String(r.extra.facilitatorAddress).toLowerCase(), ledger.signer.getAddresses()[0].toLowerCase());
});

test('a usage below the maximum: exactly the settled amount moves, PAYMENT-RESPONSE carries it', async () => {
  const { account, http } = payer();
  const { res, body, settlement, payload } = await pay(http, '/metered?units=12');
  assert.is(res.status, 200, JSON.stringify(body));
  assert.equal(body, { units: '12', chargedAtomic: '12000' });
  // What the payer signed: a Permit2 witness transfer for the maximum, to the proxy, bound to the merchant.
  const auth = (payload.payload as any).permit2Authorization;
  assert.is(auth.permitted.amount, MAX.toString());
  assert.is(auth.spender, UPTO_PROXY_ADDRESS);
  assert.is(auth.witness.to.toLowerCase(), PAYEE);
  // What the merchant settled.
  assert.ok(settlement);
  assert.is(settlement!.success, true);
  assert.is(settlement!.amount, '12000');
  assert.is(settlement!.payer!.toLowerCase(), account.address.toLowerCase());
  assert.is(settlement!.network, 'eip155:84532');
  // What the ledger moved.
  const moved = ledger.permit2Transfers.find((t) => t.tx === settlement!.transaction);
  assert.ok(moved, 'the settle transaction is on the ledger');
  assert.is(moved!.amount, 12_000n);
  assert.is(moved!.permitted, MAX);
  assert.is(moved!.to, PAYEE);
  assert.is(ledger.balanceOf(account.address), FUNDS - 12_000n);
  assert.is(ledger.allowance(account.address, PERMIT2_ADDRESS), FUNDS - 12_000n);
  // The receipt a reconcile reads: one Transfer of 12000 and the proxy's Settled, in one transaction.
  const receipt = await ledger.signer.waitForTransactionReceipt({ hash: settlement!.transaction as `0x${string}` });
  assert.is(receipt.status, 'success');
  const logs = (receipt as any).logs as { address: string; data: string }[];
  assert.is(logs.length, 2);
  assert.is(BigInt(logs[0].data), 12_000n);
  assert.is(logs[1].address, UPTO_PROXY_ADDRESS);
});

test('the same signature sent again settles nothing more (Permit2 nonce used)', async () => {
  const { account, http } = payer();
  const first = await pay(http, '/metered?units=3');
  assert.is(first.res.status, 200);
  const balance = ledger.balanceOf(account.address);
  const again = await fetch(`${merchant.url}/metered?units=3`, { headers: first.headers });
  assert.is(again.status, 402);
  assert.is(ledger.balanceOf(account.address), balance);
  assert.is(ledger.permit2Transfers.filter((t) => t.owner === account.address.toLowerCase()).length, 1);
});

test('usage at the maximum settles the maximum; above it the facilitator refuses and nothing moves', async () => {
  const at = payer();
  const full = await pay(at.http, '/metered?units=50');
  assert.is(full.res.status, 200);
  assert.is(full.settlement!.amount, MAX.toString());
  assert.is(ledger.balanceOf(at.account.address), FUNDS - MAX);

  const above = payer();
  const over = await pay(above.http, '/metered?units=51');
  assert.is(over.res.status, 402);
  assert.is(over.settlement?.success, false);
  assert.is(over.settlement?.errorReason, 'invalid_upto_evm_payload_settlement_exceeds_amount');
  assert.is(ledger.balanceOf(above.account.address), FUNDS);
});

test('no usage: success with amount 0, no transaction, nothing moves', async () => {
  const { account, http } = payer();
  const { res, settlement } = await pay(http, '/metered?units=0');
  assert.is(res.status, 200);
  assert.is(settlement!.success, true);
  assert.is(settlement!.amount, '0');
  assert.is(settlement!.transaction, '');
  assert.is(ledger.balanceOf(account.address), FUNDS);
});

test('the handler fails: nothing is settled', async () => {
  const { account, http } = payer();
  const { res } = await pay(http, '/broken');
  assert.is(res.status, 500);
  assert.is(ledger.balanceOf(account.address), FUNDS);
});

test('a raised maximum after signing (402), or no Permit2 allowance (412): refused, nothing moves', async () => {
  const forged = payer();
  const raised = await pay(forged.http, '/metered?units=5', (p) => {
    (p.payload as any).permit2Authorization.permitted.amount = (MAX * 2n).toString();
  });
  assert.is(raised.res.status, 402);
  assert.is(ledger.balanceOf(forged.account.address), FUNDS);

  // The stock server answers 412, not 402, when the payer has not approved Permit2.
  const unapproved = payer(0n);
  const refused = await pay(unapproved.http, '/metered?units=5');
  assert.is(refused.res.status, 412);
  const again = unapproved.http.getPaymentRequiredResponse((n) => refused.res.headers.get(n));
  assert.is(again.error, 'permit2_allowance_required');
  assert.is(ledger.balanceOf(unapproved.account.address), FUNDS);
});

/** Whether Permit2 has consumed `owner`'s unordered nonce: bit `nonce & 255` of word `nonce >> 8`. */
async function nonceUsed(owner: string, nonce: bigint) {
  const word = (await ledger.reader.readContract({
    address: PERMIT2_ADDRESS,
    abi: PERMIT2_ABI,
    functionName: 'nonceBitmap',
    args: [owner, nonce >> 8n],
  })) as bigint;
  return ((word >> (nonce & 0xffn)) & 1n) === 1n;
}

/**
 * What reconcile does when the settle response was lost: Permit2's bitmap says whether the permit
 * was cashed; if so, the proxy's Settled events lead to transactions whose calldata names the
 * owner, the nonce and the settled amount (Permit2 logs no nonce).
 */
async function settledOnChain(owner: string, nonce: bigint): Promise<bigint | undefined> {
  if (!(await nonceUsed(owner, nonce))) return undefined;
  for (const e of await ledger.reader.getContractEvents({
    address: UPTO_PROXY_ADDRESS,
    abi: UPTO_PROXY_ABI,
    eventName: 'Settled',
  })) {
    const t = await ledger.reader.getTransaction({ hash: e.transactionHash! });
    const call = decodeFunctionData({ abi: UPTO_PROXY_ABI, data: t.input });
    if (call.functionName !== 'settle') continue;
    const [permit, amount, from] = call.args;
    if (getAddress(from) === getAddress(owner) && permit.nonce === nonce) return amount;
  }
  throw new Error('nonce used, but no settle transaction found');
}

test('a lost settle response: the chain tells whether and how much was settled', async () => {
  const { account, http } = payer();
  const { settlement, payload } = await pay(http, '/metered?units=9');
  const nonce = BigInt((payload.payload as any).permit2Authorization.nonce);
  assert.is(await settledOnChain(account.address, nonce), 9_000n);
  assert.is(await settledOnChain(account.address, nonce + 1n), undefined);
  const receipt = await ledger.reader.getTransactionReceipt({ hash: settlement!.transaction as `0x${string}` });
  assert.is(BigInt(receipt.logs[0].data), 9_000n);
});

test('settled 0, or the handler failed: the permit is still alive until its deadline', async () => {
  const { account, http } = payer();
  const zero = await pay(http, '/metered?units=0');
  assert.is(zero.settlement!.amount, '0');
  const a = (zero.payload.payload as any).permit2Authorization;
  assert.is(await nonceUsed(account.address, BigInt(a.nonce)), false);
  // The merchant's facilitator can still cash the same signature, up to the maximum.
  const late = await fetch(`${facilitator.url}/settle`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      x402Version: 2,
      paymentPayload: zero.payload,
      paymentRequirements: { ...zero.payload.accepted, amount: '20000' },
    }),
  }).then((r) => r.json());
  assert.is(late.success, true, JSON.stringify(late));
  assert.is(late.amount, '20000');
  assert.is(ledger.balanceOf(account.address), FUNDS - 20_000n);
  assert.is(await settledOnChain(account.address, BigInt(a.nonce)), 20_000n);
});

test('the ledger itself: above the maximum, another facilitator, a raised permit, a nonce used: reverts', async () => {
  const { account, http } = payer();
  const required = await terms('/metered?units=1');
  const payload = await http.createPaymentPayload(required);
  const a = (payload.payload as any).permit2Authorization;
  const args = (amount: bigint, facilitatorAddress: string, permitted = BigInt(a.permitted.amount)) => [
    {
      permitted: { token: a.permitted.token, amount: permitted },
      nonce: BigInt(a.nonce),
      deadline: BigInt(a.deadline),
    },
    amount,
    a.from,
    { to: a.witness.to, facilitator: facilitatorAddress, validAfter: BigInt(a.witness.validAfter) },
    (payload.payload as any).signature,
  ];
  const write = (amount: bigint, f = a.witness.facilitator, permitted?: bigint) =>
    ledger.signer.writeContract({
      address: UPTO_PROXY_ADDRESS,
      abi: UPTO_PROXY_ABI,
      functionName: 'settle',
      args: args(amount, f, permitted),
    });
  await reverts(() => write(MAX + 1n), /AmountExceedsPermitted/);
  await reverts(() => write(1n, PAYEE), /UnauthorizedFacilitator/);
  await reverts(() => write(MAX + 1n, undefined, MAX * 2n), /InvalidSigner/);
  assert.is(ledger.balanceOf(account.address), FUNDS);
  await write(7n);
  assert.is(ledger.balanceOf(account.address), FUNDS - 7n);
  assert.is(ledger.balanceOf(PAYEE) >= 7n, true);
  await reverts(() => write(7n), /InvalidNonce/);
});

test.run();
