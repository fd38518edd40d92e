/**
 * The READMEs' code cannot drift from the code: every js/ts block in a README says what it is
 * (test/helpers/readme-blocks.ts), every block marked `runs` is extracted, compiled with esbuild
 * and run with Node as a program in the clone (so `import … from 'ctl'` and 'ctl-agent-tools/ai'
 * resolve as they do for a reader), exiting 0 and printing what its marker says; a `fragment` is
 * compiled. A program marked `with=gateway` runs against what `npm start` gives a reader: a gateway,
 * the demo merchant it may pay, and a session as the start banner's snippet opens it.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { transformSync } from 'esbuild';
import { repoRoot } from '../helpers/vectors.js';
import { blocksOf, CODE_LANGS, programsOf, readmes, type Program } from '../helpers/readme-blocks.js';
import { openDatabase, listen, silentLogger } from '../../service-kit/index.js';
import { openGateway } from '../../gateway/server.js';
import { startDemoMerchant, type DemoMerchant } from '../../cli/demo/merchant.js';

const files = readmes(repoRoot);
const blocks = files.flatMap((f) => blocksOf(repoRoot, f));
const code = blocks.filter((b) => CODE_LANGS.has(b.lang));
// Inside the clone (build/ is ignored by git), so a program's imports resolve from its node_modules.
const outDir = join(repoRoot, 'build', 'readme-blocks');
rmSync(outDir, { recursive: true, force: true });
mkdirSync(outDir, { recursive: true });

const compile = (source: string, lang: string) =>
  transformSync(source, { loader: /^t/.test(lang) ? 'ts' : 'js', format: 'esm', target: 'node20' }).code;

test('every js/ts block of a README is marked `runs` or `fragment`, and some run', () => {
  const unmarked = code.filter((b) => !b.kind).map((b) => `${b.file}:${b.line}`);
  assert.equal(unmarked, [], `blocks without <!-- runs --> or <!-- fragment: … --> above them: ${unmarked.join(', ')}`);
  assert.ok(files.includes('README.md') && files.includes('agent-tools/README.md'), files.join(', '));
  assert.ok(code.filter((b) => b.kind === 'runs').length >= 4, 'the runnable blocks were not found');
});

test('every fragment compiles', () => {
  for (const b of code.filter((x) => x.kind === 'fragment')) {
    try {
      compile(b.code, b.lang);
    } catch (e) {
      assert.unreachable(`${b.file}:${b.line} does not compile: ${(e as Error).message}`);
    }
  }
});

/** What `npm start` gives the reader, started once for the programs that need it. */
let stand: Promise<{ env: Record<string, string>; close(): Promise<void> }> | undefined;
function gatewayStand() {
  return (stand ??= (async () => {
    const merchant: DemoMerchant = await startDemoMerchant();
    const dir = mkdtempSync(join(tmpdir(), 'ctl-readme-'));
    const adminKey = 'readme-admin-key-0123456789';
    const gateway = await openGateway({
      db: await openDatabase(`sqlite:${join(dir, 'gateway.db')}`),
      adminKey,
      logger: silentLogger(),
      targets: { allowPrivate: false, allowHosts: [merchant.hostPort] },
    });
    const server = await listen(gateway.app, { port: 0 });
    const post = async (path: string, key: string, body: unknown) => {
      const res = await fetch(`${server.url}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      assert.is(res.status, 201, `${path}: ${await res.clone().text()}`);
      return (await res.json()) as Record<string, string>;
    };
    const { apiKey } = await post('/admin/owners', adminKey, { label: 'readme' });
    // The session the start banner's snippet opens (cli/start.ts).
    const { sessionToken } = await post('/sessions', apiKey!, {
      budget: { amount: '5000', currency: 'USD' },
      purposes: ['api:search'],
      expiresAt: new Date(Date.now() + 3600_000).toISOString().replace(/\.\d+Z$/, 'Z'),
      softLimit: { amount: '1000' },
    });
    return {
      env: { CTL_GATEWAY_URL: server.url, CTL_SESSION_TOKEN: sessionToken!, MERCHANT_URL: merchant.url },
      async close() {
        await server.close();
        await gateway.close();
        await merchant.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  })());
}
test.after(async () => {
  await (await stand)?.close();
  rmSync(outDir, { recursive: true, force: true });
});

/** Runs a compiled program without blocking this process (a gateway it talks to may be in it). */
function run(file: string, env: Record<string, string>) {
  return new Promise<{ code: number | null; out: string }>((resolve) => {
    const child = spawn(process.execPath, [file], {
      cwd: repoRoot,
      env: { PATH: process.env.PATH!, HOME: process.env.HOME ?? tmpdir(), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('close', (code) => (clearTimeout(timer), resolve({ code, out })));
  });
}

const programs: Program[] = files.flatMap((f) => programsOf(blocksOf(repoRoot, f)));
for (const p of programs) {
  test(`${p.name} runs as written${p.prints.length ? `, printing ${p.prints.join(' / ')}` : ''}`, async () => {
    const file = join(outDir, `${p.name.replace(/[^\w.-]+/g, '_')}.mjs`);
    writeFileSync(file, compile(p.code, p.lang));
    if (p.with && p.with !== 'gateway') assert.unreachable(`${p.name}: unknown with=${p.with}`);
    const env = p.with ? (await gatewayStand()).env : {};
    const r = await run(file, env);
    assert.is(r.code, 0, `${p.name} exited ${r.code}:\n${r.out}\n--- program (${file}) ---\n${p.code}`);
    for (const text of p.prints) assert.ok(r.out.includes(text), `${p.name} did not print "${text}":\n${r.out}`);
  });
}

test.run();
