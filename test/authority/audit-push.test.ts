/**
 * Audit entries pushed to webhooks signed the Standard Webhooks way, with retries and a dispatch
 * log, and, the transparency log turned off (CTL_AUTHORITY_LOG=0), the audit chain's head anchored
 * in its place off the request path, by the chain outbox's timer, to the local append-only anchor
 * file, each record saying it is the audit head (spec §4.3, §6).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { generateWebhookSecret, verifyWebhook } from '../../service-kit/index.js';
import { createFileLedger, type Ledger } from '../../service-kit/anchor/index.js';
import { startTestAuthority } from './harness.js';

test(
  'state changes reach the webhook (after a failed attempt) and the anchor; with the log off the anchor ' +
    'holds the chain head, and says so',
  async () => {
    const got: Array<{ headers: IncomingHttpHeaders; body: string }> = [];
    let calls = 0;
    const hook = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        calls++;
        if (calls === 1) return void res.writeHead(503).end(); // the first delivery fails, the retry succeeds
        got.push({ headers: req.headers, body });
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((r) => hook.listen(0, '127.0.0.1', r));
    const secret = generateWebhookSecret();
    const hookUrl = `http://127.0.0.1:${(hook.address() as AddressInfo).port}/audit`;
    // An anchor that has not answered must not hold issuance: the local anchor behind a gate
    // opened only after the requests have been answered.
    const dir = mkdtempSync(join(tmpdir(), 'ctl-anchor-'));
    const local = createFileLedger(join(dir, 'anchor.jsonl'));
    let open!: () => void;
    const gate = new Promise<void>((res) => (open = res));
    const slow: Ledger = { ...local, name: 'gated-file', broadcast: async (tx) => (await gate, local.broadcast(tx)) };
    const t = await startTestAuthority({
      env: { CTL_AUDIT_WEBHOOK_URLS: hookUrl, CTL_AUDIT_WEBHOOK_SECRET: secret, CTL_AUTHORITY_LOG: '0' },
      webhookRetry: { baseDelayMs: 5, maxAttempts: 4 },
      ledgers: [slow],
      anchorTiming: { anchorIntervalMs: 1000, pollMs: 1 },
    });
    try {
      const p = await t.call('POST', '/policies', { policy: { anchored: true } });
      assert.is(p.status, 201, 'answered while the anchor is still waiting: anchoring is fire-and-forget');
      await t.call('POST', '/admin/keys', { scopes: ['grants:write'], label: 'l' });
      assert.is((await local.read()).length, 0, 'not anchored yet');
      open();
      await t.authority.settle();
      // The timer reads the head and anchors it when it grew: each anchor is a head of the chain, the last the newest.
      await t.authority.chain.runOnce({ readHeads: true });
      await t.authority.chain.runOnce({ readHeads: false });

      const entries = (await t.call('GET', '/audit')).body.entries;
      assert.is(entries.length, 2);
      const anchored = await local.read();
      const bySeq = new Map(entries.map((e: any) => [e.seq, e.hash]));
      for (const a of anchored) assert.is(a.root, bySeq.get(a.size), `anchor of size ${a.size}`);
      assert.is(anchored[anchored.length - 1]!.size, 2);
      const listed = (await t.call('GET', '/admin/anchors')).body;
      const head = { origin: 'authority.test/ctl-authority-audit', size: 2, root: entries[1].hash };
      assert.equal(listed.logs, [{ origin: head.origin, source: 'audit-head', head }]);
      assert.equal(listed.jobs[0].job, { kind: 'anchor', head, source: 'audit-head' });
      assert.ok(
        listed.jobs.every((j: any) => j.chain === 'gated-file' && j.kind === 'anchor' && j.status === 'confirmed'),
      );

      assert.is(got.length, 2);
      for (const g of got)
        assert.ok(
          verifyWebhook(secret, g.headers as Record<string, string>, g.body),
          'signed with the configured secret',
        );
      const bodies = got.map((g) => JSON.parse(g.body)).sort((x, y) => x.data.seq - y.data.seq);
      assert.equal(
        bodies.map((b) => [b.type, b.data.action, b.data.hash]),
        entries.map((e: any) => ['audit.appended', e.action, e.hash]),
      );
      const log = (await t.call('GET', '/admin/webhooks/dispatches')).body.dispatches;
      assert.is(log.length, 2);
      assert.is(log.filter((d: any) => d.status === 'delivered').length, 2);
      assert.equal(log.map((d: any) => d.attempts).sort(), [1, 2]);
    } finally {
      await t.close();
      rmSync(dir, { recursive: true, force: true });
      await new Promise<void>((r) => hook.close(() => r()));
    }
  },
);

test.run();
