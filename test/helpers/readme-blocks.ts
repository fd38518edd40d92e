/**
 * The code blocks of the repository's READMEs, and which of them claim to run. The convention
 * (README.md "Layout and house style"): an HTML comment on the line right above a fence says what
 * the block is, and every js/ts block of a README carries one:
 *
 *   <!-- runs -->                       a whole program: compiled and run as written
 *   <!-- runs continues -->             runs appended to the runnable block before it in the same file
 *   <!-- runs prints="text" -->         …and its output must contain `text` (the blocks before it too)
 *   <!-- runs with=gateway -->          …against a gateway and the demo merchant, as `npm start` runs
 *                                       them: CTL_GATEWAY_URL, CTL_SESSION_TOKEN and MERCHANT_URL set
 *   <!-- fragment: what is left out --> part of a program (names from the reader's code): compiled only
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

export interface Block {
  /** From the repository root, and the fence's line (1-based). */
  file: string;
  line: number;
  lang: string;
  kind: 'runs' | 'fragment' | undefined;
  attrs: { continues?: boolean; prints?: string; with?: string };
  code: string;
}

/** A program: runnable blocks joined (a block and the `continues` blocks after it). */
export interface Program {
  name: string;
  lang: string;
  code: string;
  prints: string[];
  with?: string;
}

export const CODE_LANGS = new Set(['js', 'ts', 'javascript', 'typescript', 'mjs']);
const SKIP_DIRS = new Set(['node_modules', 'build', 'dist', 'pack', 'data']);

/** Every README.md of the repository (outside installs and build outputs). */
export function readmes(root: string, dir = root, out: string[] = []): string[] {
  for (const name of readdirSync(dir).sort()) {
    if (name.startsWith('.') || SKIP_DIRS.has(name)) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) readmes(root, path, out);
    else if (name === 'README.md') out.push(relative(root, path));
  }
  return out;
}

const MARKER = /^<!--\s*(runs|fragment)\b(.*?)-->\s*$/;

function parseAttrs(text: string): Block['attrs'] {
  const attrs: Block['attrs'] = {};
  for (const m of text.matchAll(/(\w+)(?:=(?:"([^"]*)"|(\S+)))?/g)) {
    const [, key, quoted, bare] = m;
    if (key === 'continues') attrs.continues = true;
    else if (key === 'prints') attrs.prints = quoted ?? bare;
    else if (key === 'with') attrs.with = quoted ?? bare;
    else throw new Error(`unknown attribute '${key}' in <!-- runs … -->`);
  }
  return attrs;
}

/** The fenced blocks of one file, with their markers. */
export function blocksOf(root: string, file: string): Block[] {
  const lines = readFileSync(join(root, file), 'utf8').split('\n');
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const end = lines.findIndex((l, j) => j > i && /^```\s*$/.test(l));
    if (end < 0) throw new Error(`${file}:${i + 1}: a fence that never closes`);
    const marker = MARKER.exec((lines[i - 1] ?? '').trim());
    const kind = marker?.[1] as Block['kind'];
    blocks.push({
      file,
      line: i + 1,
      lang: open[1]!,
      kind,
      // A fragment's text after the colon is a note for the reader, not attributes.
      attrs: kind === 'runs' ? parseAttrs(marker![2]!) : {},
      code: lines.slice(i + 1, end).join('\n') + '\n',
    });
    i = end;
  }
  return blocks;
}

/** The runnable blocks of one file as programs; a `continues` block extends the one before. */
export function programsOf(blocks: Block[]): Program[] {
  const programs: Program[] = [];
  for (const b of blocks.filter((x) => x.kind === 'runs')) {
    const last = programs.at(-1);
    const where = `${b.file}:${b.line}`;
    if (b.attrs.continues) {
      if (!last) throw new Error(`${where}: 'continues', but no runnable block before it`);
      if (b.lang !== last.lang) throw new Error(`${where}: continues a ${last.lang} block as ${b.lang}`);
      // The program grows: its name is the last block's, and everything printed before must still print.
      programs.push({
        name: `${last.name} + ${b.line}`,
        lang: b.lang,
        code: `${last.code}\n${b.code}`,
        prints: [...last.prints, ...(b.attrs.prints ? [b.attrs.prints] : [])],
        with: b.attrs.with ?? last.with,
      });
      programs.splice(programs.length - 2, 1);
    } else {
      programs.push({
        name: where,
        lang: b.lang,
        code: b.code,
        prints: b.attrs.prints ? [b.attrs.prints] : [],
        ...(b.attrs.with ? { with: b.attrs.with } : {}),
      });
    }
  }
  return programs;
}
