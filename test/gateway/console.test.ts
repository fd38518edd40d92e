/**
 * The budget owner's console in a real Chromium (playwright-core, Debian's chromium): a real
 * gateway on port 0 with a local 402 merchant on the ledger rail. The whole flow by keyboard
 * only: sign in (a wrong key first), create a session (validation first), watch a payment made
 * through /proxy appear live, open its receipt and see the check mark, pause at the soft limit
 * and continue, revoke, and see the next /proxy refused. Every page without console errors
 * (but the one 401 of the wrong key and the one 404 of a foreign session, which are the point),
 * one screenshot per page, and owner B never sees owner A's sessions or events.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { migrate, openDatabase, type SqlDatabase } from '../../service-kit/index.js';
import {
  COSIGNATURE_V1,
  createWitness,
  generateNoteSigner,
  serviceLogMigrations,
} from '../../service-kit/tlog/index.js';
import { signCheckpoint } from '../../src/entries/log.js';
import {
  sqliteDb,
  startTestGateway,
  startMerchant,
  proxy,
  call,
  ADMIN_KEY,
  type TestGateway,
  type Merchant,
  type TestDb,
} from './helpers.js';

const chromiumPath = findChromium();
const shotsDir = mkdtempSync(join(tmpdir(), 'ctl-console-shots-'));
const shots: string[] = [];

function findChromium(): string | undefined {
  for (const p of [process.env.CTL_CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser'])
    if (p && existsSync(p)) return p;
  try {
    return (
      execFileSync('sh', ['-c', 'command -v chromium || command -v chromium-browser'], { encoding: 'utf8' }).trim() ||
      undefined
    );
  } catch {
    return undefined;
  }
}

if (!chromiumPath) {
  // One line naming the package, and a skip scripts/test.mjs counts (system-packages.ts).
  console.log(
    'SKIPPED console browser test: needs the Debian package chromium (not found; or set CTL_CHROMIUM): ' +
      'apt-get install chromium',
  );
  test.skip('the console in Chromium');
  test.run();
} else {
  type Pw = typeof import('playwright-core');
  type Page = import('playwright-core').Page;
  type Browser = import('playwright-core').Browser;
  let pw: Pw;
  let browser: Browser;
  let db: TestDb;
  let gw: TestGateway;
  let witnessDb: SqlDatabase;
  const gwLogKey = await generateNoteSigner('console.test/ctl-gateway-log');
  const witnessKey = await generateNoteSigner('witness.test/w1', COSIGNATURE_V1);
  const otherLog = await generateNoteSigner('other.test/log');
  let merchant: Merchant;
  let hook: Server;
  let hookUrl = '';
  let ownerB = '';
  const hooks: string[] = [];
  /** Console errors by page name; `expected` lists those a step provokes on purpose. */
  const errors: { page: string; text: string }[] = [];

  test.before(async () => {
    pw = await import('playwright-core');
    hook = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        hooks.push(body);
        res.writeHead(204);
        res.end();
      });
    });
    await new Promise<void>((r) => hook.listen(0, '127.0.0.1', r));
    hookUrl = `http://127.0.0.1:${(hook.address() as AddressInfo).port}/hook`;
    db = sqliteDb();
    // The gateway's log asks a witness (in process, on its own database) and witnesses another log.
    witnessDb = await openDatabase(`sqlite:${join(shotsDir, 'witness.db')}`);
    await migrate(witnessDb, serviceLogMigrations('w_log'));
    const witness = createWitness({ db: witnessDb, prefix: 'w_log', signer: witnessKey, logs: [gwLogKey.vkey] });
    gw = await startTestGateway(db, {
      console: { heartbeatMs: 500 },
      log: {
        skey: gwLogKey.skey,
        witnesses: [{ url: 'http://witness.invalid/witness', vkey: witnessKey.vkey }],
        witnessOf: [otherLog.vkey],
        fetch: (async (_url: string, init: RequestInit) => {
          const a = await witness.addCheckpoint(String(init.body));
          return new Response(a.body, { status: a.status, headers: { 'content-type': a.contentType } });
        }) as typeof fetch,
      },
    });
    merchant = await startMerchant({ amount: '100' });
    ownerB = (await call(gw.url, 'POST', '/admin/owners', { key: ADMIN_KEY, body: { label: 'owner B' } })).body.apiKey;
    browser = await pw.chromium.launch({
      executablePath: chromiumPath,
      headless: true,
      // launch() gives every run a fresh temporary profile (its own --user-data-dir).
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
  });

  test.after(async () => {
    await browser?.close();
    await gw?.close();
    await merchant?.close();
    await new Promise((r) => hook?.close(r));
    await db?.drop();
    await witnessDb?.close();
    // Lines starting ARTIFACTS are echoed by scripts/test.mjs even when the file passes.
    writeFileSync(join(shotsDir, 'index.txt'), shots.join('\n') + '\n');
    const listed = shots.map((s) => `ARTIFACTS   ${s}`).join('\n');
    console.log(
      `\nARTIFACTS console screenshots (${shots.length}, one per page) in ${shotsDir} (index.txt):\n${listed}`,
    );
  });

  /** A phone: the narrowest viewport the console is made for. */
  const PHONE = { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, deviceScaleFactor: 2 };

  async function openPage(
    name: string,
    init?: (p: Page) => Promise<void>,
    device: { viewport: { width: number; height: number } } & Record<string, unknown> = {
      viewport: { width: 1280, height: 860 },
    },
  ) {
    const context = await browser.newContext(device);
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: gw.url });
    const page = await context.newPage();
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push({ page: name, text: m.text() });
    });
    page.on('pageerror', (e) => errors.push({ page: name, text: `uncaught: ${e.message}` }));
    await init?.(page);
    await page.goto(`${gw.url}/console`);
    return page;
  }

  async function shot(page: Page, file: string, what: string) {
    const path = join(shotsDir, file);
    // A modal dialog's backdrop covers the viewport only: shoot what the user sees.
    await page.screenshot({ path, fullPage: !(await page.locator('dialog[open]').count()) });
    shots.push(`${file}: ${what}`);
  }

  /** Presses Tab until the focused element matches; fails after `max` presses (keyboard-only navigation). */
  async function tabTo(
    page: Page,
    match: (el: { tag: string; text: string; label: string; id: string }) => boolean,
    max = 60,
  ) {
    for (let i = 0; i < max; i++) {
      await page.keyboard.press('Tab');
      const el = await page.evaluate(() => {
        const a = document.activeElement as HTMLElement | null;
        return {
          tag: a?.tagName.toLowerCase() ?? '',
          text: (a?.textContent ?? '').trim(),
          label: a?.getAttribute('aria-label') ?? '',
          id: a?.id ?? '',
        };
      });
      if (match(el)) return el;
    }
    throw new Error('tabTo: nothing matching was reached by keyboard');
  }
  const focusedId = (page: Page) => page.evaluate(() => document.activeElement?.id ?? '');
  /** Takes (and forgets) the console errors seen so far on the page named `page`, or on every page with ''. */
  const takeErrors = (page: string) => {
    const mine = errors.filter((e) => !page || e.page === page);
    for (const e of mine) errors.splice(errors.indexOf(e), 1);
    return mine;
  };

  let sessionId = '';
  let token = '';
  const pay = () => proxy(gw, token, `${merchant.url}/search`, { purpose: 'api:search' });

  test(
    'sign in, create, live payment, receipt check mark, pause and continue, revoke, refused: ' +
      'keyboard only, no console errors',
    async () => {
      const page = await openPage('owner A');
      await page.waitForSelector('#owner-key');
      await shot(page, '01-sign-in.png', 'sign-in page');

      // A wrong key: a clear message, nothing stored.
      await tabTo(page, (e) => e.id === 'owner-key');
      await page.keyboard.type('ctlk_wrongwrongwrong_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA');
      await page.keyboard.press('Enter');
      await page.waitForSelector('#owner-key-error:has-text("not accepted")');
      assert.is(await page.evaluate(() => sessionStorage.length), 0);
      await shot(page, '02-sign-in-wrong-key.png', 'sign-in: a wrong key is refused with a message');
      const wrong = takeErrors('owner A');
      assert.ok(
        wrong.every((e) => /401/.test(e.text)),
        `only the wrong key's 401: ${JSON.stringify(wrong)}`,
      );

      await page.keyboard.press('Control+A');
      await page.keyboard.type(gw.ownerKey);
      await page.keyboard.press('Enter');
      await page.waitForSelector('h1:has-text("Sessions")');
      await page.waitForSelector('.live-live');
      assert.is(
        await page.evaluate(() => sessionStorage.getItem('ctl.console.ownerKey')),
        gw.ownerKey,
        "the key is in this tab's session storage",
      );
      assert.is(await page.evaluate(() => localStorage.length), 0, 'and nowhere else');

      // New session, by keyboard: validation first, then a real one.
      await tabTo(page, (e) => e.tag === 'a' && e.text === 'New session');
      await page.keyboard.press('Enter');
      await page.waitForSelector('h1:has-text("New session")');
      await tabTo(page, (e) => e.id === 'f-label');
      await page.keyboard.type('Research agent');
      await tabTo(page, (e) => e.id === 'f-purposes');
      await page.keyboard.press('Enter');
      await page.waitForSelector('#f-amount-error:has-text("Ceiling: required")');
      assert.match((await page.textContent('#f-purposes-error')) ?? '', /Purposes: at least one/);
      assert.is(await focusedId(page), 'f-amount', 'focus goes to the first field to fix');
      await shot(page, '03-create-validation.png', 'create form: validation messages name the fields');
      await page.keyboard.type('3.00'); // 300 minor units: three payments of 1.00
      await page.keyboard.press('Tab');
      await page.keyboard.type('api:search');
      await tabTo(page, (e) => e.id === 'f-softLimit');
      await page.keyboard.type('2');
      await tabTo(page, (e) => e.id === 'f-merchantAllowlist');
      await page.keyboard.type('bad_host'); // passes the page's checks; the gateway refuses it, naming the field
      await tabTo(page, (e) => e.id === 'f-thresholds');
      await page.keyboard.type('50, 100');
      await tabTo(page, (e) => e.id === 'f-webhookUrl');
      await page.keyboard.type(hookUrl);
      await page.keyboard.press('Enter');
      await page.waitForSelector(
        '#f-merchantAllowlist-error:has-text("Merchants allowed: must be a host name, an address or a host glob")',
      );
      assert.is(await focusedId(page), 'f-merchantAllowlist');
      const refusedByGateway = takeErrors('owner A');
      assert.ok(
        refusedByGateway.every((e) => /400/.test(e.text)),
        `only the gateway's 400: ${JSON.stringify(refusedByGateway)}`,
      );
      await page.keyboard.press('Control+A');
      await page.keyboard.type('127.0.0.1');
      await tabTo(page, (e) => e.text === 'Create session');
      await page.keyboard.press('Enter');
      await page.waitForSelector('h1:has-text("Session created")');
      token = await page.inputValue('#token');
      assert.match(token, /^gw_sess_/);
      await tabTo(page, (e) => e.text === 'Copy session token');
      await page.keyboard.press('Enter');
      await page.waitForSelector('text=Copied.');
      assert.is(await page.evaluate(() => navigator.clipboard.readText()), token, 'the copy button copies the token');
      await shot(page, '04-session-created.png', 'session created: the token shown once, with a copy button');
      await tabTo(page, (e) => e.text === 'Open the session');
      await page.keyboard.press('Enter');
      await page.waitForSelector('h1:has-text("Research agent")');
      sessionId = decodeURIComponent(new URL(page.url()).hash.split('/')[2]!);
      assert.match(sessionId, /^sess_/);
      await page.waitForSelector('text=Receipts (0)');
      await page.evaluate(() => ((window as any).__noReload = true));

      // A payment through /proxy appears without reload, with a verified check mark.
      const paid = await pay();
      assert.is(paid.status, 200, paid.text);
      await page.waitForSelector('text=Receipts (1)', { timeout: 5000 });
      await page.waitForSelector('[data-receipt-check][data-valid="true"]');
      assert.is(await page.getAttribute('[data-receipt-check]', 'data-method'), 'WebCrypto Ed25519');
      assert.is(await page.getAttribute('ctl-spend-bar', 'spent'), '100');
      assert.ok(await page.evaluate(() => (window as any).__noReload === true), 'no reload');

      await tabTo(page, (e) => e.label.startsWith('Open receipt'));
      await page.keyboard.press('Enter');
      await page.waitForSelector('h1:has-text("Receipt 1.00 USD")');
      await page.waitForSelector('.title-row [data-receipt-check][data-valid="true"]');
      assert.match((await page.textContent('pre.raw')) ?? '', /"txRef": "txid:/);
      await shot(page, '05-receipt.png', 'a receipt: fields, signature verified in the browser, the signed JSON');
      await tabTo(page, (e) => e.tag === 'a' && e.text === 'Research agent');
      await page.keyboard.press('Enter');
      await page.waitForSelector('h1:has-text("Research agent")');

      // A live update keeps the keyboard focus where it was.
      await tabTo(page, (e) => e.label.startsWith('Open receipt'));
      assert.is((await pay()).status, 200);
      await page.waitForSelector('text=Receipts (2)', { timeout: 5000 });
      assert.match(
        await page.evaluate(() => document.activeElement?.getAttribute('aria-label') ?? ''),
        /^Open receipt/,
        'focus kept across the live update',
      );

      // Up to the ceiling, then the soft limit pauses the session: the page turns paused live.
      assert.is((await pay()).status, 200);
      const paused = await pay();
      assert.is(paused.status, 409);
      assert.is(paused.body.error.code, 'session_paused');
      await page.waitForSelector('.title-row .state-paused', { timeout: 5000 });
      await page.waitForSelector('text=Receipts (3)');
      await page.waitForSelector('[data-action="continue"]');
      // The receipts as CSV, by keyboard.
      await tabTo(page, (e) => e.text === 'Download CSV');
      const [download] = await Promise.all([page.waitForEvent('download'), page.keyboard.press('Enter')]);
      const csv = await (await download.createReadStream()).toArray().then((c) => Buffer.concat(c).toString('utf8'));
      const lines = csv.trim().split('\r\n');
      assert.is(lines.length, 4);
      assert.match(lines[0]!, /^"paidAt","receiptId","amountMinor","amount","currency"/);
      assert.match(lines[1]!, /,"100","1.00","USD","127.0.0.1","api:search","txid:/);
      await shot(
        page,
        '06-session-paused.png',
        'session page, paused at its ceiling: bounds, spend chart, receipts, webhook log',
      );

      await tabTo(page, (e) => e.text.startsWith('Approve continuation'));
      await page.keyboard.press('Enter');
      await page.waitForSelector('dialog[open] h2:has-text("Approve continuation")');
      assert.is(
        await page.evaluate(() => document.activeElement?.textContent),
        'Cancel',
        'the safe choice has the focus',
      );
      await shot(page, '07-approve-dialog.png', 'approve continuation dialog');
      await tabTo(page, (e) => e.text === 'Approve');
      await page.keyboard.press('Enter');
      await page.waitForSelector('.title-row .state-active', { timeout: 5000 });
      assert.match((await page.textContent('.figures')) ?? '', /5\.00 USD/, 'the ceiling rose by the soft limit');
      assert.is((await pay()).status, 200, 'the agent pays again');
      await page.waitForSelector('text=Receipts (4)', { timeout: 5000 });

      // Revoke, confirmed; the next payment is refused.
      await tabTo(page, (e) => e.text.startsWith('Revoke session'));
      await page.keyboard.press('Enter');
      await page.waitForSelector('dialog[open] h2:has-text("Revoke this session?")');
      await shot(page, '08-revoke-dialog.png', 'revoke confirmation');
      await tabTo(page, (e) => e.text === 'Revoke session');
      await page.keyboard.press('Enter');
      await page.waitForSelector('.title-row .state-revoked', { timeout: 5000 });
      const refused = await pay();
      assert.is(refused.status, 410);
      assert.is(refused.body.error.code, 'session_revoked');
      await gw.gw.idle();

      // The list: filter by state, by keyboard; then back to the session for its webhook log.
      await tabTo(page, (e) => e.tag === 'a' && e.text === 'Sessions');
      await page.keyboard.press('Enter');
      await page.waitForSelector(`tr[data-session="${sessionId}"]`);
      await tabTo(page, (e) => e.tag === 'button' && e.text.startsWith('Revoked'));
      await page.keyboard.press('Enter');
      await page.waitForSelector('button[aria-pressed="true"]:has-text("Revoked")');
      assert.is(await page.locator('tbody tr').count(), 1);
      const feed = (await page.textContent('.feed')) ?? '';
      for (const t of [
        'payment.completed',
        'session.paused',
        'session.continued',
        'session.revoked',
        'session.created',
      ])
        assert.ok(feed.includes(t), `live activity shows ${t}`);
      await shot(page, '09-sessions-list.png', 'sessions list, filtered to revoked, with live activity');
      await tabTo(page, (e) => e.tag === 'a' && e.text === 'Research agent');
      await page.keyboard.press('Enter');
      await page.waitForSelector('text=Receipts (4)');
      const deliveries = await page.locator('#hooks-h + .table-wrap tbody tr').count();
      assert.ok(deliveries >= 5 && hooks.length >= 5, `webhook deliveries listed: ${deliveries}`);
      await shot(page, '10-session-revoked.png', 'session page after revocation, with the webhook dispatch log');

      // Sign out clears the key.
      await tabTo(page, (e) => e.text === 'Sign out');
      await page.keyboard.press('Enter');
      await page.waitForSelector('#owner-key');
      assert.is(await page.evaluate(() => sessionStorage.length), 0);
      const left = takeErrors('owner A');
      assert.equal(left, [], `console errors: ${JSON.stringify(left)}`);
      await page.context().close();
    },
  );

  test('owner B never sees owner A: not in the list, not by id, not on the live feed', async () => {
    const b = await openPage('owner B', async (p) => {
      await p.addInitScript((k) => sessionStorage.setItem('ctl.console.ownerKey', k), ownerB);
    });
    await b.waitForSelector('.live-live');
    await b.waitForSelector('text=No sessions yet');
    // Owner A's new session and payment, while B watches.
    const a = await call(gw.url, 'POST', '/sessions', {
      key: gw.ownerKey,
      body: {
        budget: { amount: '1000', currency: 'USD' },
        purposes: ['api:search'],
        expiresAt: new Date(Date.now() + 3600_000).toISOString().replace(/\.\d+Z$/, 'Z'),
        label: 'A only',
      },
    });
    assert.is(a.status, 201);
    assert.is((await proxy(gw, a.body.sessionToken, `${merchant.url}/x`, { purpose: 'api:search' })).status, 200);
    await new Promise((r) => setTimeout(r, 700));
    assert.is(await b.locator('tbody tr').count(), 0);
    assert.match((await b.textContent('.feed')) ?? '', /Nothing yet/);
    await shot(b, '11-owner-b.png', "owner B's console: none of owner A's sessions or events");
    assert.equal(takeErrors('owner B'), []);
    await b.goto(`${gw.url}/console#/sessions/${a.body.sessionId}`);
    await b.waitForSelector('text=No such session for this owner.');
    const foreign = takeErrors('owner B');
    assert.ok(
      foreign.length > 0 && foreign.every((e) => /404/.test(e.text)),
      `only the 404: ${JSON.stringify(foreign)}`,
    );
    await b.context().close();
  });

  test(
    'check marks are real: an altered receipt is marked invalid; without WebCrypto Ed25519 ' + 'the SDK verifies',
    async () => {
      const init = async (p: Page) => {
        await p.addInitScript((k) => sessionStorage.setItem('ctl.console.ownerKey', k), gw.ownerKey);
      };
      let tamper = false;
      const tampered = await openPage('tamper', async (p) => {
        await init(p);
        await p.route('**/sessions/*/receipts?*', async (route) => {
          const res = await route.fetch();
          const body = await res.json();
          if (tamper) body.receipts[0].amount.amountMinor = '1';
          await route.fulfill({ response: res, json: body });
        });
      });
      await tampered.goto(`${gw.url}/console#/sessions/${sessionId}`);
      await tampered.waitForSelector('text=Receipts (4)');
      await tampered.waitForFunction(
        () => document.querySelectorAll('[data-receipt-check][data-valid="true"]').length === 4,
      );
      // The same receipt, altered after it was verified once in this page: checked again, not taken from a cache.
      tamper = true;
      await tampered.evaluate(() => (location.hash = '#/sessions'));
      await tampered.waitForSelector('h1:has-text("Sessions")');
      await tampered.evaluate((id) => (location.hash = `#/sessions/${id}`), sessionId);
      await tampered.waitForSelector('[data-receipt-check][data-valid="false"]');
      assert.is(
        await tampered.locator('[data-receipt-check][data-valid="true"]').count(),
        3,
        'the untouched ones still verify',
      );
      await tampered.context().close();

      const noEd = await openPage('sdk fallback', async (p) => {
        await init(p);
        await p.addInitScript(() => {
          const real = crypto.subtle.importKey.bind(crypto.subtle);
          (crypto.subtle as any).importKey = (format: any, key: any, alg: any, ...rest: any[]) =>
            (alg?.name ?? alg) === 'Ed25519'
              ? Promise.reject(new DOMException('Ed25519 unsupported', 'NotSupportedError'))
              : (real as any)(format, key, alg, ...rest);
        });
      });
      await noEd.goto(`${gw.url}/console#/sessions/${sessionId}`);
      await noEd.waitForSelector('[data-receipt-check][data-valid="true"]');
      assert.is(await noEd.locator('[data-receipt-check][data-method="CTL SDK"][data-valid="true"]').count(), 4);
      await noEd.context().close();
      assert.equal(takeErrors(''), []);
    },
  );

  test('a revoked session shows nothing remaining: list, page and spend bar', async () => {
    const page = await openPage('revoked remaining', async (p) => {
      await p.addInitScript((k) => sessionStorage.setItem('ctl.console.ownerKey', k), gw.ownerKey);
    });
    await page.waitForSelector(`tr[data-session="${sessionId}"]`);
    assert.is((await page.textContent(`tr[data-session="${sessionId}"] td.remaining`))?.trim(), 'none (revoked)');
    await page.goto(`${gw.url}/console#/sessions/${sessionId}`);
    await page.waitForSelector('.title-row .state-revoked');
    const figures = await page.evaluate(() =>
      Object.fromEntries(
        [...document.querySelectorAll('dl.figures > div, dl.figures dt')].flatMap((el) => {
          const dt = el.tagName === 'DT' ? el : el.querySelector('dt');
          return dt ? [[dt.textContent!.trim(), dt.nextElementSibling?.textContent?.trim() ?? '']] : [];
        }),
      ),
    );
    assert.is(figures['Remaining'], 'none (revoked)', JSON.stringify(figures));
    assert.match((await page.getAttribute('ctl-spend-bar .bar', 'aria-label')) ?? '', /nothing remaining \(revoked\)$/);
    assert.equal(takeErrors('revoked remaining'), []);
    await page.context().close();
  });

  test(
    'the console fits a phone (390 px): Sign out, spend and expiry on screen, nothing ' + 'wider than the screen',
    async () => {
      // A live session with a payment, so that its spend and expiry have something to show.
      const live = await call(gw.url, 'POST', '/sessions', {
        key: gw.ownerKey,
        body: {
          budget: { amount: '1000', currency: 'USD' },
          purposes: ['api:search'],
          expiresAt: new Date(Date.now() + 3600_000).toISOString().replace(/\.\d+Z$/, 'Z'),
          label: 'Phone check',
        },
      });
      assert.is(live.status, 201);
      assert.is(
        (await proxy(gw, live.body.sessionToken, `${merchant.url}/search`, { purpose: 'api:search' })).status,
        200,
      );
      const page = await openPage(
        'phone',
        async (p) => {
          await p.addInitScript((k) => sessionStorage.setItem('ctl.console.ownerKey', k), gw.ownerKey);
        },
        PHONE,
      );
      /**
       * Each selector's first match lies inside the viewport horizontally (and is shown); the page does not scroll
       * sideways.
       */
      const onScreen = async (where: string, selectors: string[]) => {
        const width = PHONE.viewport.width;
        // The elements that stick out, outermost first, name what to fix.
        const wide = await page.evaluate(
          (w) =>
            [...document.querySelectorAll('body *')]
              .filter(
                (el) =>
                  el.getBoundingClientRect().right > w + 0.5 &&
                  !(el.parentElement && el.parentElement.getBoundingClientRect().right > w + 0.5),
              )
              .slice(0, 5)
              .map(
                (el) =>
                  `${el.tagName.toLowerCase()}.${el.className} (${Math.round(el.getBoundingClientRect().right)} px)`,
              ),
          width,
        );
        assert.ok(
          (await page.evaluate(() => document.documentElement.scrollWidth)) <= width,
          `${where}: the page is wider than ${width} px: ${wide.join(', ')}`,
        );
        for (const sel of selectors) {
          const box = await page.locator(sel).first().boundingBox();
          assert.ok(box && box.width > 0 && box.height > 0, `${where}: ${sel} is not shown`);
          assert.ok(
            box!.x >= 0 && box!.x + box!.width <= width + 0.5,
            `${where}: ${sel} is cut (x ${box!.x}, width ${box!.width})`,
          );
        }
      };
      const row = `tr[data-session="${live.body.sessionId}"]`;
      await page.waitForSelector(row);
      await onScreen('sessions list', [
        'button:has-text("Sign out")',
        `${row} a`,
        `${row} ctl-spend-bar .bar`,
        `${row} ctl-spend-bar .bar-figures`,
        `${row} td.remaining`,
        `${row} ctl-countdown`,
        'a:has-text("New session")',
      ]);
      await shot(
        page,
        '12-phone-sessions.png',
        'sessions list on a phone (390 px): stacked rows, spend and expiry on screen',
      );
      await page.goto(`${gw.url}/console#/sessions/${live.body.sessionId}`);
      await page.waitForSelector('h1:has-text("Phone check")');
      await page.waitForSelector('text=Receipts (1)');
      await onScreen('session page', [
        'button:has-text("Sign out")',
        'ctl-spend-bar.large .bar',
        'ctl-spend-bar.large .bar-figures',
        'ctl-countdown',
        'button:has-text("Revoke session")',
        'dl.figures',
      ]);
      await shot(page, '13-phone-session.png', 'a session on a phone (390 px)');
      await page.goto(`${gw.url}/console#/new`);
      await page.waitForSelector('h1:has-text("New session")');
      await onScreen('new session', ['button:has-text("Sign out")', '#f-amount', 'button:has-text("Create session")']);
      await shot(page, '14-phone-create.png', 'the create form on a phone (390 px)');
      assert.equal(takeErrors('phone'), []);
      await page.context().close();
    },
  );

  test(
    'child sessions: the list shows the tree, the spend total counts each payment once, states and a ' +
      "parent's receipts agree with the API; the create form makes windows",
    async () => {
      const key = gw.ownerKey;
      const expiresAt = new Date(Date.now() + 3600_000).toISOString().replace(/\.\d+Z$/, 'Z');
      const made = await call(gw.url, 'POST', '/sessions', {
        key,
        body: {
          budget: { amount: '500', currency: 'USD' },
          softLimit: { amount: '100' },
          purposes: ['api:search'],
          expiresAt,
          label: 'Tree parent',
        },
      });
      const parent = made.body as { sessionId: string; sessionToken: string };
      const sub = async (of: { sessionId: string; sessionToken: string }, amount: string, label: string) => {
        const r = await call(gw.url, 'POST', `/sessions/${of.sessionId}/children`, {
          key: of.sessionToken,
          body: { budget: { amount }, label },
        });
        assert.is(r.status, 201, r.text);
        return r.body as { sessionId: string; sessionToken: string };
      };
      const child = await sub(parent, '400', 'Tree child');
      const grandchild = await sub(child, '200', 'Tree grandchild');
      for (const t of [parent, child, child, grandchild, grandchild])
        assert.is((await proxy(gw, t.sessionToken, `${merchant.url}/search`, { purpose: 'api:search' })).status, 200);
      const paused = await proxy(gw, parent.sessionToken, `${merchant.url}/search`, { purpose: 'api:search' });
      assert.is(paused.body.error.code, 'session_paused', 'the parent is paused at its ceiling');

      const api = (await call(gw.url, 'GET', '/sessions?limit=200', { key })).body.sessions as {
        sessionId: string;
        state: string;
        stateFrom?: string;
        parentId?: string;
        spentMinor: string;
        budget: { currency: string };
      }[];
      const byId = new Map(api.map((x) => [x.sessionId, x]));
      const ids = [parent.sessionId, child.sessionId, grandchild.sessionId];
      assert.equal(
        ids.map((id) => [byId.get(id)!.state, byId.get(id)!.stateFrom]),
        [
          ['paused', undefined],
          ['paused', parent.sessionId],
          ['paused', parent.sessionId],
        ],
        'the API: a child of a paused parent is paused',
      );
      // What the live sessions spent: each payment once, in the root session that counts it.
      const live = api.filter((x) => x.state === 'active' || x.state === 'paused');
      const once = live.filter((x) => !x.parentId).reduce((a, x) => a + BigInt(x.spentMinor), 0n);
      const twice = live.reduce((a, x) => a + BigInt(x.spentMinor), 0n);
      assert.ok(twice > once, 'a sum over every live session would count the children twice');
      const usd = (minor: bigint) =>
        `${(Number(minor) / 100).toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })} USD`;

      const page = await openPage('tree', async (p) => {
        await p.addInitScript((k) => sessionStorage.setItem('ctl.console.ownerKey', k), key);
      });
      await page.waitForSelector(`tr[data-session="${grandchild.sessionId}"]`);
      const rows = await page.$$eval('tbody tr', (trs) =>
        trs.map((tr) => ({
          id: tr.getAttribute('data-session'),
          parent: tr.getAttribute('data-parent'),
          child: tr.classList.contains('child'),
          state: tr.querySelector('.badge')?.className.replace(/^.*state-/, ''),
          from: tr.querySelector('.badge')?.getAttribute('data-state-from') ?? undefined,
        })),
      );
      const at = (id: string) => rows.findIndex((r) => r.id === id);
      assert.ok(at(parent.sessionId) >= 0 && at(parent.sessionId) + 1 === at(child.sessionId), 'the child below it');
      assert.is(at(child.sessionId) + 1, at(grandchild.sessionId), 'the grandchild below the child');
      assert.equal(
        rows.filter((r) => ids.includes(r.id!)).map((r) => [r.parent, r.child]),
        [
          [null, false],
          [parent.sessionId, true],
          [child.sessionId, true],
        ],
      );
      for (const r of rows) assert.is(r.state, byId.get(r.id!)!.state, `the state of ${r.id} is the API's`);
      assert.is(rows[at(child.sessionId)]!.from, 'Tree parent', 'and says whose it is');
      const tile = await page.$$eval('.tile', (ts) =>
        ts.map((t) => [t.querySelector('.tile-label')?.textContent, t.querySelector('.tile-value')?.textContent]),
      );
      assert.equal(tile.find((t) => t[0] === 'Spent in live sessions')?.[1], usd(once));
      await shot(page, '15-sessions-tree.png', 'sessions list: child sessions below their parent, states inherited');

      // The parent: its spend, chart and receipts count the same payments; each receipt names its payer.
      await page.click(`tr[data-session="${parent.sessionId}"] th a`);
      await page.waitForSelector('h1:has-text("Tree parent")');
      await page.waitForSelector('text=Receipts (5)');
      const detail = (await call(gw.url, 'GET', `/sessions/${parent.sessionId}`, { key })).body;
      const all = (await call(gw.url, 'GET', `/sessions/${parent.sessionId}/receipts?descendants=true`, { key })).body
        .receipts as { sessionId: string; amount: { amountMinor: string } }[];
      assert.is(
        all.reduce((a, r) => a + BigInt(r.amount.amountMinor), 0n).toString(),
        detail.spentMinor,
        'the API: the receipts add up to the spend',
      );
      assert.equal(
        (await page.$$eval('[data-paid-by]', (tds) => tds.map((td) => td.getAttribute('data-paid-by')))).sort(),
        all.map((r) => r.sessionId).sort(),
      );
      assert.is(await page.getAttribute('ctl-spend-bar.large', 'spent'), detail.spentMinor);
      assert.match(
        (await page.getAttribute('svg.chart', 'aria-label')) ?? '',
        new RegExp(`5 payments, ${usd(BigInt(detail.spentMinor)).replace('.', '\\.')} of a`),
      );
      await page.waitForSelector(`[data-tree-session="${grandchild.sessionId}"] .state-paused`);
      await shot(page, '16-session-parent.png', "a parent: its children's receipts in its chart and list");

      // The child: paused with its parent, and says so.
      await page.click(`[data-paid-by="${child.sessionId}"] a`);
      await page.waitForSelector('h1:has-text("Tree child")');
      await page.waitForSelector(`.title-row .state-paused[data-state-from]`);
      await page.waitForSelector(`.callout[data-state-from="${parent.sessionId}"]`);
      assert.is(await page.locator('[data-action="continue"]').count(), 0, "the approval is the parent's");
      await shot(page, '17-session-child-paused.png', 'a child of a paused parent: paused with it');

      // The create form's windows reach the API.
      await page.goto(`${gw.url}/console#/new`);
      await page.waitForSelector('h1:has-text("New session")');
      await page.fill('#f-label', 'Windowed');
      await page.fill('#f-amount', '50');
      await page.fill('#f-purposes', 'api:search');
      await page.fill('#f-window-P1D', '60');
      await page.click('button:has-text("Create session")');
      await page.waitForSelector('#f-window-P1D-error:has-text("at most the ceiling")');
      await page.fill('#f-window-P1D', '20');
      await page.fill('#f-windowPayments-P1D', '5');
      await page.fill('#f-window-PT1H', '5');
      await page.click('button:has-text("Create session")');
      await page.waitForSelector('h1:has-text("Session created")');
      const created = await page.getAttribute('a:has-text("Open the session")', 'href');
      const windowed = await call(gw.url, 'GET', `/sessions/${created!.split('/')[2]}`, { key });
      assert.equal(
        windowed.body.windows.map((w: { every: string; maxAmountMinor: string; maxPayments?: number }) => [
          w.every,
          w.maxAmountMinor,
          w.maxPayments,
        ]),
        [
          ['PT1H', '500', undefined],
          ['P1D', '2000', 5],
        ],
      );
      await page.goto(`${gw.url}/console${created}`);
      await page.waitForSelector('[data-window="P1D"]');
      assert.equal(takeErrors('tree'), []);
      await page.context().close();
    },
  );

  test('the log page: the latest checkpoint, its cosignature, and a split-view banner', async () => {
    await gw.gw.log!.log.publish();
    const status = (await call(gw.url, 'GET', '/log/status')).body;
    assert.ok(status.checkpoint.size > 0, 'the payments above are in the log');
    const page = await openPage('log', async (p) => {
      await p.addInitScript((k) => sessionStorage.setItem('ctl.console.ownerKey', k), gw.ownerKey);
    });
    await page.waitForSelector('h1:has-text("Sessions")');
    await page.click('nav a:has-text("Log")');
    await page.waitForSelector('h1:has-text("Transparency log")');
    const shown = await page.textContent('#log-checkpoint');
    assert.match(shown!, String(status.checkpoint.size));
    assert.match(shown!, status.checkpoint.root);
    await page.waitForSelector('#log-verdict:has-text("Signed by the log")');
    await page.waitForSelector(`#log-cosignatures:has-text("${witnessKey.name}")`);
    assert.is(await page.locator('#split-view-banner').count(), 0, 'no split view yet');
    await shot(page, '18-log.png', "the log page: latest checkpoint, signature checked, the witness's cosignature");

    // Another log shows this gateway (its witness) two trees of size 1: a split view.
    const root = (b: number) => new Uint8Array(32).fill(b);
    const note = (b: number) => signCheckpoint({ origin: otherLog.name, size: 1, rootHash: root(b) }, [otherLog.note!]);
    const add = (body: string) => fetch(`${gw.url}/witness/add-checkpoint`, { method: 'POST', body });
    assert.is((await add(`old 0\n\n${await note(1)}`)).status, 200);
    assert.is((await add(`old 1\n\n${await note(2)}`)).status, 409);
    await page.click('nav a:has-text("Sessions")');
    await page.waitForSelector('#split-view-banner:has-text("Split view detected")');
    assert.match((await page.textContent('#split-view-banner'))!, `${otherLog.name} at size 1`);
    await shot(page, '19-split-view.png', 'a split view seen as a witness: a banner above every page');
    assert.equal(takeErrors('log'), []);
    await page.context().close();
  });

  test('served with a strict CSP and no inline script', async () => {
    const res = await fetch(`${gw.url}/console`);
    assert.is(res.status, 200);
    const csp = res.headers.get('content-security-policy') ?? '';
    assert.match(csp, /default-src 'self'/);
    assert.match(csp, /script-src 'self'(;|$)/);
    assert.not.match(csp, /unsafe-inline|unsafe-eval|https?:/);
    assert.is(res.headers.get('x-content-type-options'), 'nosniff');
    assert.is(res.headers.get('x-frame-options'), 'DENY');
    const html = await res.text();
    assert.not.match(html, /<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script');
    assert.not.match(html, /\son[a-z]+=/i, 'no inline handler');
    assert.not.match(html, /https?:\/\//, 'nothing external');
    const js = await fetch(`${gw.url}/console/console.js`);
    assert.match(js.headers.get('content-type') ?? '', /javascript/);
    assert.is((await fetch(`${gw.url}/console/../package.json`)).status, 404);
  });

  test.run();
}
