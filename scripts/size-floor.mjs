#!/usr/bin/env node
// How small the budgeted SDK files could get by shortening messages alone: gzip -9 of each built
// file as it is, with every string over 16 characters emptied (the refusals' messages, the bytes
// that could go without dropping a check or a feature), and with every string emptied, beside its budget
// (scripts/size-budgets.json; test/bundles/size-budgets.test.ts holds them). What is left after
// that is code: the checks of PROTOCOL.md §3–§5, §11, §12 and what they need (JCS, strict JSON,
// key import, SHA-2, the root chain, the ledgers).
//
//   npm run build && node scripts/size-floor.mjs
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { parseAst } from 'rollup/parseAst';

const root = new URL('../', import.meta.url);
const budgets = JSON.parse(readFileSync(new URL('scripts/size-budgets.json', root), 'utf8'));
const gzip = (text) => gzipSync(Buffer.from(text), { level: 9 }).length;

/** `text` with the contents of every string literal and template chunk over `min` characters removed (`min` 0: every one). */
function withoutLongStrings(text, min = 16) {
  const spans = [];
  (function walk(node) {
    if (!node || typeof node.type !== 'string') return;
    if (node.type === 'Literal' && typeof node.value === 'string' && node.value.length > min) spans.push([node.start + 1, node.end - 1]);
    if (node.type === 'TemplateElement' && node.value.raw.length > min) spans.push([node.start, node.end]);
    for (const v of Object.values(node)) {
      if (Array.isArray(v)) v.forEach(walk);
      else if (v && typeof v === 'object') walk(v);
    }
  })(parseAst(text));
  let out = text;
  for (const [a, b] of spans.sort((x, y) => y[0] - x[0])) out = out.slice(0, a) + out.slice(b);
  return out;
}

// Emptying every string also empties what is not a message (member names, alphabets, error
// codes), so the last column is below anything a working build could reach by its strings.
console.log('file                    gzip -9   strings > 16 emptied   every string emptied   budget   last ÷ budget');
for (const [file, budget] of Object.entries(budgets)) {
  const text = readFileSync(new URL(`dist/${file}`, root), 'utf8');
  const long = gzip(withoutLongStrings(text));
  const all = gzip(withoutLongStrings(text, 0));
  console.log(`${file.padEnd(22)} ${String(gzip(text)).padStart(8)}   ${String(long).padStart(20)}   ${String(all).padStart(20)}   ${String(budget).padStart(6)}   ${(all / budget).toFixed(2)}x${all > budget ? '  (over budget with no string left)' : ''}`);
}
