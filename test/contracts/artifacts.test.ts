/**
 * The committed contract artifacts (contracts/*.json) are what a fresh compile of their sources
 * gives with the pinned solc (scripts/compile-contracts.mjs), and the ABIs the services call
 * (service-kit/chain/contracts.ts) are the compiled ones.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { x402UptoPermit2ProxyABI } from '@x402/evm';
import { CTL_ANCHOR_ABI, CTL_REVOCATION_TOKENS_ABI, contractArtifact } from '../../service-kit/chain/contracts.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));

test('every committed artifact equals a fresh compile of its source', async () => {
  const { compileContracts, artifactText } = await import(`${root}scripts/compile-contracts.mjs`);
  const fresh = compileContracts() as Record<string, unknown>;
  assert.ok(Object.keys(fresh).includes('contracts/CtlAnchor.json'));
  assert.ok(Object.keys(fresh).includes('contracts/CtlRevocationTokens.json'));
  assert.ok(Object.keys(fresh).includes('contracts/x402/UsdcEip3009.json'));
  assert.ok(Object.keys(fresh).includes('contracts/x402/x402UptoPermit2Proxy.json'));
  for (const [path, artifact] of Object.entries(fresh))
    assert.is(
      readFileSync(`${root}${path}`, 'utf8'),
      artifactText(artifact),
      `${path} differs from its source: node scripts/compile-contracts.mjs`,
    );
});

test('the compiler is the pinned devDependency', () => {
  const pkg = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as { devDependencies: Record<string, string> };
  const solc = createRequire(import.meta.url)('solc/package.json') as { version: string };
  assert.is(pkg.devDependencies['solc'], solc.version, 'solc is pinned exactly (bytecode depends on it)');
  assert.match(contractArtifact('CtlAnchor').compiler.solc, new RegExp(`^${solc.version.replace(/\./g, '\\.')}\\+`));
});

/** JSON with every object's keys sorted, so two ABIs compare by content, not by key order. */
const canonical = (v: unknown): string =>
  JSON.stringify(v, (_k, x) =>
    x && typeof x === 'object' && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort()) : x,
  );
const items = (abi: readonly unknown[]) => abi.map(canonical).sort();

test('the ABIs the services call are the compiled ones', () => {
  assert.equal(items(CTL_ANCHOR_ABI), items(contractArtifact('CtlAnchor').abi));
  assert.equal(items(CTL_REVOCATION_TOKENS_ABI), items(contractArtifact('CtlRevocationTokens').abi));
});

test("the upto proxy has the ABI @x402/evm calls at the proxy's canonical address", () => {
  assert.equal(items(contractArtifact('x402/x402UptoPermit2Proxy').abi), items(x402UptoPermit2ProxyABI));
});

test.run();
