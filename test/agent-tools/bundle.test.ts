/**
 * The ctl-agent-tools package ships bundles (scripts/bundle-packages.mjs, its prepack), not the
 * compiled tree: each entry builds with the SDK inlined, imports only the packages its
 * package.json declares (the frameworks as peers), serves the same tools, and has declarations.
 * In a clone the workspace is imported by its name, as an application would (the root's
 * `prepare` builds it at `npm install`; scripts/test.mjs again when it is older than its sources).
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const TOKEN = 'gw_sess_' + 'A'.repeat(43);

test('the entries build, import only declared packages, and give each framework the tools', async () => {
  // Inside the repository, so the bundle's external imports resolve from its node_modules.
  const dir = mkdtempSync(join(root, 'build', 'agent-tools-bundle-'));
  try {
    const built = spawnSync(
      process.execPath,
      [join(root, 'scripts', 'bundle-packages.mjs'), 'agent-tools', '--out', dir],
      { cwd: root, encoding: 'utf8' },
    );
    assert.is(built.status, 0, built.stderr);
    const pkg = JSON.parse(readFileSync(join(root, 'agent-tools', 'package.json'), 'utf8'));
    const declared = new Set(Object.keys({ ...pkg.dependencies, ...pkg.peerDependencies }));
    const files = [
      ...readdirSync(dir).filter((f) => f.endsWith('.js')),
      ...readdirSync(join(dir, 'chunks')).map((f) => `chunks/${f}`),
    ];
    for (const f of files) {
      const code = readFileSync(join(dir, f), 'utf8');
      for (const [, spec] of code.matchAll(/from\s*"([^"]+)"/g)) {
        if (spec!.startsWith('./') || spec!.startsWith('../') || spec!.startsWith('node:')) continue;
        const name = spec!
          .split('/')
          .slice(0, spec!.startsWith('@') ? 2 : 1)
          .join('/');
        assert.ok(declared.has(name), `${f} imports ${spec}, not declared in agent-tools/package.json`);
      }
    }
    // Every `exports` entry exists, with its declarations.
    for (const [entry, target] of Object.entries(pkg.exports as Record<string, { types: string; import: string }>)) {
      if (entry === './package.json') continue;
      for (const path of [target.import, target.types])
        assert.ok(existsSync(join(dir, path.replace(/^\.\/dist\//, ''))), `${entry}: ${path}`);
    }

    const ai = await import(pathToFileURL(join(dir, 'ai.js')).href);
    assert.equal(Object.keys(ai.ctlAiTools({ gatewayUrl: 'http://127.0.0.1:9', sessionToken: TOKEN })).sort(), [
      'check_log',
      'delegate_budget',
      'list_receipts',
      'paid_fetch',
      'session_status',
    ]);
    const lc = await import(pathToFileURL(join(dir, 'langchain.js')).href);
    assert.equal(
      lc
        .ctlLangChainTools({ gatewayUrl: 'http://127.0.0.1:9', sessionToken: TOKEN })
        .map((t: { name: string }) => t.name),
      ['paid_fetch', 'session_status', 'list_receipts', 'delegate_budget', 'check_log'],
    );
    assert.throws(() => lc.ctlLangChainTools({ gatewayUrl: 'http://gw.example', sessionToken: TOKEN }), /gatewayUrl/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('in the repository, `ctl-agent-tools/ai` and `/langchain` import by name (the workspace)', async () => {
  const ai = await import('ctl-agent-tools/ai');
  assert.equal(Object.keys(ai.ctlAiTools({ gatewayUrl: 'http://127.0.0.1:9', sessionToken: TOKEN })).sort(), [
    'check_log',
    'delegate_budget',
    'list_receipts',
    'paid_fetch',
    'session_status',
  ]);
  const lc = await import('ctl-agent-tools/langchain');
  assert.is(lc.ctlLangChainTools({ gatewayUrl: 'http://127.0.0.1:9', sessionToken: TOKEN }).length, 5);
});

test.run();
