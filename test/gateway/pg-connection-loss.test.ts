/**
 * PostgreSQL connections lost under paid traffic (a restart, a failover, an idle timeout or a
 * proxy ending them): two gateway processes on one database of their own, a paid burst running,
 * every backend of the database terminated again and again. Both processes stay up, every answer
 * is a success or `503 unavailable` (never a 500), the books balance once reconcile has settled
 * what the losses left open, and requests made after recovery pay on both instances.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startMerchant, startTestGateway, createSession, proxy, call, ADMIN_KEY, type TestDb } from './helpers.js';
import { openDatabase } from '../../service-kit/index.js';
import { freshDatabase, freshSchema, pgAvailable, terminateBackends, PG_URL } from '../service-kit/pg-fixture.js';

interface Instance {
  url: string;
  child: ChildProcess;
  /** Set when the process ended before the test stopped it. */
  crashed?: string;
  stderr: string;
}

function startProcess(url: string, schema: string): Promise<Instance> {
  const file = fileURLToPath(new URL('./fixtures/gateway-process.js', import.meta.url));
  const child = spawn(process.execPath, [file], {
    env: { ...process.env, DATABASE_URL: url, CTL_TEST_PG_SCHEMA: schema, CTL_GATEWAY_ADMIN_KEY: ADMIN_KEY },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const inst: Instance = { url: '', child, stderr: '' };
  child.stderr!.on('data', (d) => (inst.stderr += d));
  child.on('exit', (code, signal) => {
    if (inst.crashed === undefined) inst.crashed = `exited ${code ?? signal}`;
  });
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error('gateway process did not start in 20 s')), 20_000);
    child.stdout!.on('data', (d) => {
      out += d;
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (line && !inst.url) {
        clearTimeout(timer);
        inst.url = JSON.parse(line).url;
        resolve(inst);
      }
    });
    child.on('exit', () => reject(new Error(`gateway process exited at start: ${inst.stderr}`)));
  });
}

function stop(inst: Instance): Promise<void> {
  if (inst.child.exitCode !== null || inst.child.signalCode !== null) return Promise.resolve();
  inst.crashed = '';
  return new Promise((r) => {
    inst.child.once('exit', () => r());
    inst.child.kill('SIGTERM');
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function readyWithin(url: string, ms: number): Promise<void> {
  for (const end = Date.now() + ms; ;) {
    const ok = await fetch(`${url}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return;
    if (Date.now() > end) throw new Error(`${url} not ready ${ms} ms after the database came back`);
    await sleep(100);
  }
}

test(
  'two gateway processes, every PostgreSQL backend terminated under a paid burst: both ' +
    'stay up, 2xx or 503 only, the books balance, payments resume',
  async () => {
    if (!(await pgAvailable())) {
      console.log(`SKIPPED connection loss under load: PostgreSQL at ${PG_URL} is unreachable`);
      return;
    }
    const database = await freshDatabase();
    const schema = freshSchema();
    const merchant = await startMerchant({ amount: '1' });
    const instances: Instance[] = [];
    try {
      instances.push(await startProcess(database.url, schema));
      instances.push(await startProcess(database.url, schema));
      const [a, b] = instances as [Instance, Instance];
      const owner = (await call(a.url, 'POST', '/admin/owners', { key: ADMIN_KEY, body: { label: 'loss' } })).body
        .apiKey as string;
      const sessions: Awaited<ReturnType<typeof createSession>>[] = [];
      for (let i = 0; i < 4; i++) {
        // A webhook on each session keeps the outbox (statements outside a transaction) busy too.
        sessions.push(
          await createSession({ url: a.url, ownerKey: owner } as never, {
            budget: { amount: '1000000', currency: 'USD' },
            webhookUrl: `${merchant.url}/free`,
          }),
        );
      }

      const statuses = new Map<string, number>();
      const count = (k: string) => statuses.set(k, (statuses.get(k) ?? 0) + 1);
      let running = true;
      let n = 0;
      const workers = Array.from({ length: 12 }, async (_, w) => {
        while (running) {
          const i = n++;
          const inst = instances[i % 2]!;
          const s = sessions[(i + w) % sessions.length]!;
          const r = await proxy(inst, s.sessionToken, `${merchant.url}/p${i}`, { purpose: 'api:search' }).then(
            (res) => `${res.status}${res.status >= 300 ? ` ${res.body?.error?.code}` : ''}`,
            (e: Error) => `no answer (${e.message})`,
          );
          count(r);
        }
      });
      let terminated = 0;
      let busy = 0;
      await sleep(500);
      for (let round = 0; round < 6; round++) {
        const cut = await terminateBackends(database.url);
        terminated += cut.ended;
        busy += cut.busy;
        await sleep(400 + Math.random() * 400);
      }
      await sleep(300);
      running = false;
      await Promise.all(workers);

      const summary = [...statuses].map(([k, v]) => `${k}: ${v}`).join(', ');
      if (process.env.CTL_TEST_VERBOSE)
        console.log(`answers under connection loss: ${summary}; ${busy} busy of ${terminated} connections cut`);
      for (const inst of instances)
        assert.is(inst.crashed, undefined, `a gateway process died (${inst.crashed}): ${inst.stderr.slice(-2000)}`);
      assert.ok(terminated >= 6, `backends were terminated (${terminated})`);
      const wrong = [...statuses.keys()].filter((k) => !/^2\d\d$/.test(k) && !/^503 unavailable$/.test(k));
      assert.equal(wrong, [], `answers other than 2xx and 503 unavailable: ${summary}`);
      assert.ok((statuses.get('200') ?? 0) > 0, `some payments went through: ${summary}`);
      assert.ok(busy > 0, `connections were cut while busy (${busy} of ${terminated}): ${summary}`);

      // The database is back: both instances serve, and pay.
      for (const inst of instances) {
        await readyWithin(inst.url, 10_000);
        const paid = await proxy(inst, sessions[0]!.sessionToken, `${merchant.url}/after`, { purpose: 'api:search' });
        assert.is(paid.status, 200, `after recovery: ${paid.status} ${paid.text}`);
        assert.ok(paid.headers.get('x-ctl-receipt-id'));
      }
      assert.ok(
        merchant.seen.some((r) => r.url === '/free'),
        'the webhook outbox delivered',
      );
      for (const inst of instances) await stop(inst);

      // Reconcile settles what the losses left open; then spent = paid = receipts, nothing reserved.
      const testDb: TestDb = {
        url: database.url,
        schema,
        open: () => openDatabase(database.url, { schema }),
        drop: async () => {},
      };
      const gw = await startTestGateway(testDb, {}, owner);
      try {
        await gw.gw.reconcile(0);
        const open = await gw.db.get<{ n: unknown }>(
          `SELECT COUNT(*) AS n FROM gw_payments WHERE state NOT IN ('paid', 'released')`,
        );
        assert.is(Number(open!.n), 0, 'no payment left open');
        const books = await gw.db.get<Record<string, unknown>>(
          `SELECT (SELECT COALESCE(SUM(reserved), 0) FROM gw_sessions) AS reserved,
                (SELECT COALESCE(SUM(spent), 0) FROM gw_sessions) AS spent,
                (SELECT COALESCE(SUM(amount), 0) FROM gw_payments WHERE state = 'paid') AS paid,
                (SELECT COUNT(*) FROM gw_payments WHERE state = 'paid') AS paid_count,
                (SELECT COUNT(*) FROM gw_receipts) AS receipts,
                (SELECT COUNT(*) FROM gw_ledger WHERE status = 'paid') AS ledger_paid,
                (SELECT COALESCE(SUM(amount), 0) FROM gw_ledger WHERE status = 'paid') AS ledger_amount`,
        );
        const v = Object.fromEntries(Object.entries(books!).map(([k, x]) => [k, Number(x)]));
        assert.is(v.reserved, 0, `reserved left: ${JSON.stringify(v)}`);
        assert.is(v.spent, v.paid, `spent = paid: ${JSON.stringify(v)}`);
        assert.is(v.paid_count, v.receipts, `paid = receipts: ${JSON.stringify(v)}`);
        assert.is(v.ledger_paid, v.receipts, `ledger = receipts: ${JSON.stringify(v)}`);
        assert.is(v.ledger_amount, v.spent, `ledger amount = spent: ${JSON.stringify(v)}`);
        assert.ok(
          v.receipts >= (statuses.get('200') ?? 0) + 2,
          `every 200 has its receipt: ${JSON.stringify(v)} ${summary}`,
        );
      } finally {
        await gw.close();
      }
    } finally {
      for (const inst of instances) await stop(inst);
      await merchant.close();
      await database.drop();
    }
  },
);

test.run();
