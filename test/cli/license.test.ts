/**
 * The package carries the licence package.json names: LICENSE holds the full Apache License 2.0
 * (every section, not a one-line pointer) and `npm pack` ships it.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { existsSync, readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { root } from '../../firmware-bridge/node/device-script.js';

test('LICENSE is the full Apache License 2.0, as package.json says', () => {
  assert.is(JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).license, 'Apache-2.0');
  assert.ok(existsSync(join(root, 'LICENSE')), 'LICENSE exists');
  const text = readFileSync(join(root, 'LICENSE'), 'utf8');
  assert.match(text, /Apache License\s+Version 2\.0, January 2004/);
  const sections = [
    'Definitions',
    'Grant of Copyright License',
    'Grant of Patent License',
    'Redistribution',
    'Submission of Contributions',
    'Trademarks',
    'Disclaimer of Warranty',
    'Limitation of Liability',
    'Accepting Warranty or Additional Liability',
  ];
  sections.forEach((title, i) =>
    assert.match(text, new RegExp(`\\n\\s*${i + 1}\\. ${title}\\.`), `section ${i + 1}. ${title}`),
  );
  assert.match(text, /END OF TERMS AND CONDITIONS/);
  assert.ok(text.length > 10_000, 'the full text, not a pointer to it');
});

test('npm pack ships LICENSE', () => {
  const r = spawnSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
    cwd: root,
    encoding: 'utf8',
    timeout: 60_000,
  });
  assert.is(r.status, 0, r.stderr);
  const files = (JSON.parse(r.stdout) as { files: { path: string }[] }[])[0]!.files.map((f) => f.path);
  assert.ok(files.includes('LICENSE'), files.filter((f) => !f.startsWith('build/')).join(', '));
});

test.run();
