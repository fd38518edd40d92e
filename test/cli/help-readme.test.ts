/**
 * Every bin answers `--help` and `--version` without its configuration (an empty environment, a
 * directory of its own), and `--help` lists every variable of its README's configuration table
 * with the same default; `ctl --help` names every `ctl <command> <subcommand>` of the README's
 * Commands table.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { root } from '../../firmware-bridge/node/device-script.js';
import { freshServiceBundles } from './service-bundles.js';

const cwd = mkdtempSync(join(tmpdir(), 'ctl-help-'));
const version = (dir: string) =>
  (JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8')) as { version: string }).version;

const BINS = [
  { name: 'ctl', file: 'bin/ctl.mjs', pkg: '.', readme: undefined },
  { name: 'ctl-authority', file: 'authority/bin/ctl-authority.mjs', pkg: 'authority', readme: 'authority/README.md' },
  { name: 'ctl-gateway', file: 'gateway/bin/ctl-gateway.mjs', pkg: 'gateway', readme: 'gateway/README.md' },
  { name: 'ctl-mcp', file: 'mcp/bin/ctl-mcp.mjs', pkg: 'mcp', readme: 'mcp/README.md' },
] as const;

/** Runs a bin with nothing configured: only PATH, and a LOG_LEVEL that would refuse a start. */
function run(file: string, args: string[]) {
  const r = spawnSync(process.execPath, [join(root, file), ...args], {
    cwd,
    env: { PATH: process.env.PATH!, LOG_LEVEL: 'not-a-level' },
    encoding: 'utf8',
    timeout: 30_000,
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

test.before(() => freshServiceBundles(['authority', 'gateway', 'mcp']));

for (const bin of BINS) {
  test(`${bin.name} --help and -h: usage on stdout, exit 0, without configuration`, () => {
    for (const flag of ['--help', '-h']) {
      const r = run(bin.file, [flag]);
      assert.is(r.code, 0, `${flag}: ${r.out}${r.err}`);
      assert.match(r.out, new RegExp(`^usage: ${bin.name}\\b`));
      assert.is(r.err, '');
    }
  });

  test(`${bin.name} --version and -V: its package's version, exit 0, without configuration`, () => {
    for (const flag of ['--version', '-V']) {
      const r = run(bin.file, [flag]);
      assert.is(r.code, 0, `${flag}: ${r.out}${r.err}`);
      assert.is(r.out.trim(), version(bin.pkg));
    }
  });
}

interface Row {
  names: string[];
  defaults: (string | undefined)[];
}

/**
 * The rows of the first table whose header starts `| variable |`: names from the first cell, defaults from a `default`
 * column.
 */
function configTable(markdown: string): Row[] {
  const lines = markdown.split('\n');
  const head = lines.findIndex((l) => /^\| variable \|/.test(l));
  assert.ok(head >= 0, 'a configuration table');
  const hasDefault = lines[head]!.split('|').map((c) => c.trim())[2] === 'default';
  const rows: Row[] = [];
  for (const line of lines.slice(head + 2)) {
    if (!line.startsWith('|')) break;
    const cells = line
      .split(/(?<!\\)\|/)
      .slice(1, -1)
      .map((c) => c.trim());
    const names = [...cells[0]!.matchAll(/`([A-Z][A-Z0-9_]+)(?:=[^`]*)?`/g)].map((m) => m[1]!);
    // A default column whose cell is one `value` per variable; prose ("generated, stored …") is not compared.
    const parts = hasDefault ? cells[1]!.split(/,\s*/) : [];
    const literal = parts.length === names.length && parts.every((p) => /^`[^`]+`$/.test(p));
    rows.push({ names, defaults: names.map((_, i) => (literal ? parts[i]!.slice(1, -1) : undefined)) });
  }
  return rows;
}

for (const bin of BINS.filter((b) => b.readme)) {
  test(`${bin.name} --help lists every variable of ${bin.readme}, with the same defaults`, () => {
    const help = run(bin.file, ['--help']).out;
    const rows = configTable(readFileSync(join(root, bin.readme!), 'utf8'));
    assert.ok(rows.length > 1);
    for (const row of rows) {
      row.names.forEach((name, i) => {
        const line = help.split('\n').find((l) => new RegExp(`^\\s+${name}(\\s|\\(|$)`).test(l));
        assert.ok(line, `${bin.name} --help does not list ${name}:\n${help}`);
        const def = row.defaults[i];
        if (def !== undefined && def !== 'none')
          assert.ok(line!.includes(`(${def})`), `${name}: README default ${def}, help says: ${line}`);
      });
    }
  });
}

test('ctl --help names every command and subcommand of the README Commands table', () => {
  const help = run('bin/ctl.mjs', ['--help']).out;
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const table = readme.slice(readme.indexOf('## Commands'), readme.indexOf('\n## ', readme.indexOf('## Commands') + 1));
  const pairs = [...table.matchAll(/`(?:npx )?ctl ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?/g)].map(
    (m) => [m[1]!, m[2]] as const,
  );
  assert.ok(pairs.length > 5);
  for (const [command, sub] of pairs) {
    const line = help.split('\n').find((l) => new RegExp(`^  ${command}\\b`).test(l));
    assert.ok(line, `ctl --help does not list ${command}`);
    if (sub) assert.ok(line!.includes(sub), `ctl --help: ${command} does not name ${sub}: ${line}`);
  }
});

test.after(() => rmSync(cwd, { recursive: true, force: true }));
test.run();
