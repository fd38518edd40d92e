#!/usr/bin/env node
// Compiles the Solidity contracts under contracts/ with solc from npm (the devDependency's exact
// version, so a compile is reproducible) and writes, beside each `X.sol`, the artifact `X.json` of
// the contract named `X` in it: ABI, creation and runtime bytecode, the compiler and settings,
// and the source's SHA-256. The artifacts are committed; a test compiles again and compares
// (test/contracts/artifacts.test.ts), so a source edited without `node scripts/compile-contracts.mjs`
// fails the suite. A file without a contract of its name (interfaces, libraries) has no artifact
// of its own; it is compiled with the files that import it.
// Usage: node scripts/compile-contracts.mjs [--check]   (--check: compare only, exit 1 on a difference)
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative, dirname, basename, posix, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
export const CONTRACTS_DIR = join(root, 'contracts');

/** Fixed settings: changing one changes every bytecode, and the committed artifacts with it. */
export const SOLC_SETTINGS = {
  optimizer: { enabled: true, runs: 200 },
  // Cancun: what the EVM chains in use run (and anvil); no opcode newer than the chains an operator anchors on.
  evmVersion: 'cancun',
  outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object', 'evm.deployedBytecode.object'] } },
};

function sources(dir, out = []) {
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) sources(path, out);
    else if (name.endsWith('.sol')) out.push(path);
  }
  return out;
}

/** The artifacts a fresh compile gives: `{ [path of X.json from the repository root]: artifact }`. */
export function compileContracts() {
  const solc = createRequire(import.meta.url)('solc');
  const files = sources(CONTRACTS_DIR);
  const unit = (path) => relative(root, path).split(sep).join('/');
  const input = {
    language: 'Solidity',
    sources: Object.fromEntries(files.map((f) => [unit(f), { content: readFileSync(f, 'utf8') }])),
    settings: SOLC_SETTINGS,
  };
  // Imports resolve from the importing file's folder inside contracts/, never outside it.
  const findImports = (path) => {
    const full = join(root, ...path.split('/'));
    if (!full.startsWith(CONTRACTS_DIR + sep) || !existsSync(full)) return { error: `not found: ${path}` };
    return { contents: readFileSync(full, 'utf8') };
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input), { import: findImports }));
  const errors = (output.errors ?? []).filter((e) => e.severity === 'error');
  if (errors.length) throw new Error(errors.map((e) => e.formattedMessage).join('\n'));
  const out = {};
  for (const f of files) {
    const name = basename(f, '.sol');
    const c = output.contracts?.[unit(f)]?.[name];
    if (!c) continue;
    const source = readFileSync(f);
    out[unit(join(dirname(f), `${name}.json`))] = {
      contractName: name,
      source: posix.join(...unit(f).split('/')),
      sourceSha256: createHash('sha256').update(source).digest('hex'),
      compiler: {
        solc: solc.version(),
        settings: { optimizer: SOLC_SETTINGS.optimizer, evmVersion: SOLC_SETTINGS.evmVersion },
      },
      abi: c.abi,
      bytecode: `0x${c.evm.bytecode.object}`,
      deployedBytecode: `0x${c.evm.deployedBytecode.object}`,
    };
  }
  return out;
}

export const artifactText = (artifact) => `${JSON.stringify(artifact, null, 2)}\n`;

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const check = process.argv.includes('--check');
  let differ = 0;
  for (const [path, artifact] of Object.entries(compileContracts())) {
    const file = join(root, path);
    const text = artifactText(artifact);
    const same = existsSync(file) && readFileSync(file, 'utf8') === text;
    if (same) continue;
    differ++;
    if (check) console.error(`${path}: differs from a fresh compile`);
    else (writeFileSync(file, text), console.log(`wrote ${path}`));
  }
  if (check && differ) process.exit(1);
  if (!differ) console.log('contracts: every artifact matches its source');
}
