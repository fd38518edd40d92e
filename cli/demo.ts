/**
 * `npm run demo` / `ctl demo`: the whole story in one command, against a demo x402
 * merchant on this machine. A budget owner opens a session; an agent pays through the gateway;
 * a purpose outside the policy and a metadata address are refused; the soft ceiling pauses the
 * session and the owner's continuation resumes it; revocation stops the agent; the receipts
 * verify against the gateway's keys and the merchant checks a txid; last, with the SDK alone, a
 * charger holds 30.00 and captures 12.34 under a daily window. Exits 1 if any step does not
 * behave as told.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { verifyReceipt } from '../src/index.js';
import { createGatewayClient } from '../src/index.js';
import { startDemoMerchant, DEMO_MERCHANT_ADDRESS } from './demo/merchant.js';
import { formatMinor as money } from './demo/money.js';
import { chargerHoldStep } from './demo/charger-step.js';

const USAGE = 'usage: ctl demo   (runs a gateway and a demo merchant on 127.0.0.1, temporary SQLite)';

export async function main(args: string[]): Promise<number | void> {
  if (args.includes('--help') || args.includes('-h')) return (console.log(USAGE), 0);
  if (args.length)
    return (
      console.error(`${args[0]!.startsWith('-') ? 'unknown option' : 'unexpected argument'} ${args[0]}\n\n${USAGE}`),
      2
    );
  // The gateway's modules load only to run the demo: --help and a usage error answer without them.
  const [{ openDatabase, listen, silentLogger }, { openGateway }, { startX402Demo }] = await Promise.all([
    import('../service-kit/index.js'),
    import('../gateway/server.js'),
    import('./demo/x402-step.js'),
  ]);
  let failures = 0;
  const step = (n: number, text: string) => console.log(`\n${n}. ${text}`);
  const show = (text: string) => console.log(`   ${text}`);
  const expect = (ok: boolean, what: string) => {
    console.log(`   ${ok ? '✓' : '✗'} ${what}`);
    if (!ok) failures++;
  };

  // The demo merchant: a search API priced at 1.00 USD per call (X-Payment dialect).
  const merchant = await startDemoMerchant();
  const shop = merchant.url;

  const dir = mkdtempSync(join(tmpdir(), 'ctl-demo-'));
  const db = await openDatabase(`sqlite:${join(dir, 'gateway.db')}`);
  const adminKey = 'demo-admin-key-0123456789';
  // A second merchant that only knows the official x402 packages.
  const x402 = await startX402Demo();
  // Private targets stay refused; only the demo merchants' exact host:port are let through.
  const gateway = await openGateway({
    db,
    adminKey,
    logger: silentLogger(),
    targets: { allowPrivate: false, allowHosts: [merchant.hostPort, ...(x402 ? [x402.merchantHost] : [])] },
    ...(x402 ? { x402: { assets: new Map([['USDC', [{ network: 'eip155:84532', asset: x402.usdc }]]]) } } : {}),
  });
  const server = await listen(gateway.app, { port: 0 });
  try {
    console.log(`gateway ${server.url}, demo merchant ${shop} (${money('100', 'USD')} per search)`);
    const ownerKey = (
      (await (
        await fetch(`${server.url}/admin/owners`, {
          method: 'POST',
          headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
          body: '{"label":"demo owner"}',
        })
      ).json()) as { apiKey: string }
    ).apiKey;
    const owner = createGatewayClient({ baseUrl: server.url, ownerKey });

    step(
      1,
      `The budget owner opens a session: ${money('300', 'USD')}, purpose api:search, soft ` +
        `ceiling +${money('100', 'USD')}, one hour`,
    );
    const expiresAt = new Date(Date.now() + 3600_000).toISOString().replace(/\.\d+Z$/, 'Z');
    const created = await owner.createSession({
      budget: { amount: '300', currency: 'USD' },
      purposes: ['api:search'],
      expiresAt,
      label: 'research agent',
      softLimit: { amount: '100' },
      trustLevel: 1,
    });
    show(`sessionId ${created.sessionId}, token ${created.sessionToken.slice(0, 16)}…`);

    let softLimitCalls = 0;
    const agent = createGatewayClient({ baseUrl: server.url }).session(created.sessionToken, {
      sessionId: created.sessionId,
      onSoftLimit: async (info) => {
        softLimitCalls++;
        show(`onSoftLimit: ${info.message}`);
        const token = (await owner.getSession(created.sessionId)).continuationToken;
        show(`the owner approves with continuation token ${token?.slice(0, 14)}…`);
        return token;
      },
    });

    step(2, 'The agent makes three paid searches through the gateway (it never sees the 402)');
    for (let i = 1; i <= 3; i++) {
      const res = await agent.fetch(`${shop}/search?q=${i}`, { purpose: 'api:search' });
      const body = (await res.json()) as { paidWith: string };
      show(`search ${i}: HTTP ${res.status}, paid with ${body.paidWith}`);
      expect(res.status === 200, `search ${i} paid`);
    }

    step(3, 'A purchase outside the policy is refused before any payment');
    try {
      await agent.fetch(`${shop}/checkout`, { purpose: 'shopping:checkout' });
      expect(false, 'refused');
    } catch (e) {
      expect((e as { code?: string }).code === 'purpose_not_allowed', `refused: ${(e as Error).message}`);
    }

    step(4, 'The agent is tricked into calling the cloud metadata address');
    try {
      await agent.fetch('http://169.254.169.254/latest/meta-data/', { purpose: 'api:search' });
      expect(false, 'refused');
    } catch (e) {
      expect((e as { code?: string }).code === 'target_not_allowed', `refused: ${(e as Error).message}`);
    }

    step(5, 'A fourth search would cross the ceiling: the session pauses, the owner continues it');
    const res4 = await agent.fetch(`${shop}/search?q=4`, { purpose: 'api:search' });
    expect(res4.status === 200 && softLimitCalls === 1, `search 4 paid after continuation (HTTP ${res4.status})`);
    const afterContinue = await owner.getSession(created.sessionId);
    const usd = (minor: string) => money(minor, afterContinue.budget.currency);
    show(
      `ceiling now ${usd(afterContinue.budget.amount)}, spent ${usd(afterContinue.spentMinor)}, ` +
        `state ${afterContinue.state}`,
    );

    step(6, 'The owner revokes the session; the agent is stopped at once');
    await owner.revokeSession(created.sessionId);
    try {
      await agent.fetch(`${shop}/search?q=5`, { purpose: 'api:search' });
      expect(false, 'refused');
    } catch (e) {
      expect((e as { code?: string }).code === 'session_revoked', `refused: ${(e as Error).message}`);
    }

    step(7, 'The receipts: signed by the gateway, verified with its published keys; the merchant checks a txid');
    const { receipts } = await owner.receipts(created.sessionId);
    const jwks = await (await fetch(`${server.url}/.well-known/ctl-keys.json`)).json();
    for (const r of receipts) {
      const v = await verifyReceipt(r, { jwks: jwks as any });
      const amount = r.amount as { amountMinor: string; currency: string };
      show(
        `${r.receiptId}  ${money(amount.amountMinor, amount.currency)}  ${r.merchant}  ${r.txRef} ` +
          ` signature ${v.valid ? 'valid' : 'INVALID'}`,
      );
      if (!v.valid) failures++;
    }
    expect(receipts.length === 4, `${receipts.length} receipts, total ${usd(afterContinue.spentMinor)}`);
    const check = (await (
      await fetch(`${server.url}/charge/${encodeURIComponent(String(receipts[0]!.txRef))}/verify`)
    ).json()) as { paid: boolean; address: string };
    expect(
      check.paid && check.address === DEMO_MERCHANT_ADDRESS,
      `merchant verification of ${receipts[0]!.txRef}: paid to ${check.address}`,
    );

    step(
      8,
      'An unmodified x402 merchant (stock @x402/express, stock facilitator, in-memory chain): ' +
        'the agent pays it in USDC',
    );
    if (!x402) show('skipped: the x402 development dependencies are not installed');
    else {
      x402.fund(gateway.evmAddress, 1_000_000n);
      const usdc = await owner.createSession({
        budget: { amount: '15000', currency: 'USDC' },
        purposes: ['api:search'],
        expiresAt,
        label: 'x402 agent',
      });
      const x402Agent = createGatewayClient({ baseUrl: server.url }).session(usdc.sessionToken, {
        sessionId: usdc.sessionId,
      });
      const paid = await x402Agent.fetch(`${x402.merchantUrl}/data?q=x402`, { purpose: 'api:search', method: 'GET' });
      const body = await paid.text();
      show(`HTTP ${paid.status} ${body}; the merchant now holds ${money(x402.balanceOf(x402.payTo), 'USDC')}`);
      const [rc] = (await owner.receipts(usdc.sessionId)).receipts;
      expect(
        paid.status === 200 && !!rc && String(rc.txRef).startsWith('txid:0x'),
        `receipt ${rc?.receiptId}: ${rc?.txRef} on ${rc?.rail}`,
      );
      try {
        await x402Agent.fetch(`${x402.merchantUrl}/data?q=again`, { purpose: 'api:search', method: 'GET' });
        expect(false, 'refused');
      } catch (e) {
        expect(
          (e as { code?: string }).code === 'budget_exceeded',
          `a second ${money('10000', 'USDC')} does not fit the ${money('15000', 'USDC')} budget: ` +
            'refused before anything was signed',
        );
      }
    }

    step(9, 'A charger holds 30.00 USD and captures 12.34 USD (SDK wallet and verifier in this process, offline)');
    await chargerHoldStep(show, expect);
  } finally {
    await x402?.close();
    await server.close();
    await gateway.close();
    await db.close();
    await merchant.close();
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(failures ? `\n${failures} step(s) did not behave as expected` : '\nEvery step behaved as expected.');
  return failures ? 1 : 0;
}
