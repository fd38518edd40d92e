// The house style's check (ARCHITECTURE.md): Prettier's formatting, and no line past 120 characters
// anywhere Prettier cannot break one (comments, long strings). Run by .ci/run; `--write` formats.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

const MAX = 120;
const files = execFileSync('git', ['ls-files', '*.ts', '*.mjs', '*.js', '*.cjs', '*.css'], { encoding: 'utf8' })
  .split('\n')
  .filter(Boolean);
const prettier = ['prettier', process.argv.includes('--write') ? '--write' : '--check', '--log-level', 'warn'];
let failed = false;
try {
  execFileSync('npx', [...prettier, ...files], { stdio: 'inherit' });
} catch {
  failed = true;
}
const long = [];
for (const file of files) {
  readFileSync(file, 'utf8')
    .split('\n')
    .forEach((line, i) => {
      if (line.length > MAX) long.push(`${file}:${i + 1}: ${line.length} characters`);
    });
}
if (long.length) {
  console.error(`${long.length} lines longer than ${MAX} characters:\n${long.join('\n')}`);
  failed = true;
}
console.log(failed ? 'style: not clean' : `style: ${files.length} files clean`);
process.exit(failed ? 1 : 0);
