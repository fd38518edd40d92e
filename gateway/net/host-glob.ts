/**
 * Host globs for merchantAllowlist / merchantBlocklist (PROTOCOL.md §8), matched in time linear
 * in the host for a given glob: each glob compiles to a small program (a Thompson NFA) run over the
 * host once, every state visited at most once per character, so no glob can hold the event loop
 * the way a backtracking regular expression over the whole host can (`*.*.*.*.*.example.com`).
 *
 * Syntax (the picomatch globs these fields were first matched with, over a host, which has no `/`):
 *   `*` (and `**`) any run of characters, dots included (`*.example.com` matches `a.b.example.com`
 *   but not `example.com`); `?` one character; `[abc]`, `[a-z]`, `[^a]` / `[!a]` one character of
 *   (or not of) a set; `{a,b}` alternatives, nestable; `{1..3}` / `{a..c}` a range (at most
 *   MAX_RANGE values); a leading `!` negates the glob. A `[` or `{` left open, and `{x}` without a
 *   comma, are literal text. Hosts are matched in their canonical form (service-kit/host-name.ts:
 *   lower case, IDNA to ASCII, no trailing dot, IPv4-mapped IPv6 as IPv4), which the session's
 *   merchant matcher (sessions/config.ts) gives them in.
 */

import { domainToASCII } from 'node:url';
import { canonicalHost } from '../../service-kit/host-name.js';

type Op =
  | { op: 'char'; c: string }
  | { op: 'any' }
  | { op: 'set'; ranges: Array<[string, string]>; negated: boolean }
  | { op: 'split'; x: number; y: number }
  | { op: 'jmp'; x: number }
  | { op: 'match' };

/** The characters of a host name, lowercase (what a set must admit one of to match anything). */
const HOST_CHARACTERS = 'abcdefghijklmnopqrstuvwxyz0123456789.-';

/** A range `{m..n}` with more values than this is literal text. */
export const MAX_RANGE = 256;
/** The largest program one glob may compile to (ranges and alternatives make it grow). */
export const MAX_GLOB_PROGRAM = 2048;
/** The largest sum of programs in one list: one host is checked against the whole list. */
export const MAX_LIST_PROGRAM = 4096;

export interface CompiledGlob {
  readonly negated: boolean;
  /**
   * True when a part can match no host character: a bracket or brace read as literal text (left
   * open, `{x}` without a comma, a range too long) or a set of none of `a-z0-9.-` (`[z-a]`,
   * `[]]`). Such a glob can never match, and a blocklist entry of it would block nothing. Sessions
   * refuse it.
   */
  readonly inert: boolean;
  /** Number of instructions: the matcher does at most (host length + 1) × size steps. */
  readonly size: number;
  /** True when the host (lowercase, no trailing dot) matches; `steps.n` counts the states visited. */
  test(host: string, steps?: { n: number }): boolean;
}

// A parsed glob: a sequence of atoms, where an atom is a piece or an alternation of sequences.
type Node =
  | { k: 'char'; c: string }
  | { k: 'any' }
  | { k: 'star' }
  | { k: 'set'; ranges: Array<[string, string]>; negated: boolean }
  | { k: 'alt'; alts: Node[][] };

function parseClass(p: string, i: number): { node: Node; end: number } | undefined {
  let j = i + 1;
  let negated = false;
  if (p[j] === '!' || p[j] === '^') {
    negated = true;
    j++;
  }
  const ranges: Array<[string, string]> = [];
  let first = true;
  while (j < p.length && (p[j] !== ']' || first)) {
    const c = p[j]!;
    if (p[j + 1] === '-' && j + 2 < p.length && p[j + 2] !== ']') {
      ranges.push([c, p[j + 2]!]);
      j += 3;
    } else {
      ranges.push([c, c]);
      j++;
    }
    first = false;
  }
  if (j >= p.length) return undefined; // never closed: literal
  return { node: { k: 'set', ranges, negated }, end: j + 1 };
}

/** The index of the `}` closing the `{` at i, and the top-level commas, or undefined when unclosed. */
function braceExtent(p: string, i: number): { end: number; commas: number[] } | undefined {
  let depth = 0;
  const commas: number[] = [];
  for (let j = i; j < p.length; j++) {
    const c = p[j];
    if (c === '[') {
      const cls = parseClass(p, j);
      if (cls) j = cls.end - 1;
    } else if (c === '{') depth++;
    else if (c === '}') {
      depth--;
      if (depth === 0) return { end: j, commas };
    } else if (c === ',' && depth === 1) commas.push(j);
  }
  return undefined;
}

function rangeValues(body: string): string[] | undefined {
  const m = /^(-?\d+)\.\.(-?\d+)$/.exec(body) ?? /^([a-z])\.\.([a-z])$/.exec(body);
  if (!m) return undefined;
  const [a, b] = [m[1]!, m[2]!];
  if (/^[a-z]$/.test(a)) {
    const [x, y] = [a.charCodeAt(0), b.charCodeAt(0)];
    const out: string[] = [];
    for (let c = x; x <= y ? c <= y : c >= y; c += x <= y ? 1 : -1) out.push(String.fromCharCode(c));
    return out;
  }
  const [x, y] = [Number(a), Number(b)];
  if (Math.abs(y - x) + 1 > MAX_RANGE) return undefined;
  const width =
    /^-?0\d/.test(a) || /^-?0\d/.test(b) ? Math.max(a.replace('-', '').length, b.replace('-', '').length) : 0;
  const out: string[] = [];
  for (let n = x; x <= y ? n <= y : n >= y; n += x <= y ? 1 : -1)
    out.push((n < 0 ? '-' : '') + String(Math.abs(n)).padStart(width, '0'));
  return out;
}

function parseSeq(p: string, from: number, to: number): Node[] {
  const out: Node[] = [];
  for (let i = from; i < to;) {
    const c = p[i]!;
    if (c === '*') {
      while (p[i] === '*' && i < to) i++;
      if (out.at(-1)?.k !== 'star') out.push({ k: 'star' });
      continue;
    }
    if (c === '?') {
      out.push({ k: 'any' });
      i++;
      continue;
    }
    if (c === '[') {
      const cls = parseClass(p, i);
      if (cls && cls.end <= to) {
        out.push(cls.node);
        i = cls.end;
        continue;
      }
    }
    if (c === '{') {
      const b = braceExtent(p, i);
      if (b && b.end < to) {
        if (b.commas.length > 0) {
          const bounds = [i, ...b.commas, b.end];
          out.push({ k: 'alt', alts: bounds.slice(1).map((end, n) => parseSeq(p, bounds[n]! + 1, end)) });
          i = b.end + 1;
          continue;
        }
        const values = rangeValues(p.slice(i + 1, b.end));
        if (values) {
          out.push({ k: 'alt', alts: values.map((v) => [...v].map((ch): Node => ({ k: 'char', c: ch }))) });
          i = b.end + 1;
          continue;
        }
      }
    }
    out.push({ k: 'char', c });
    i++;
  }
  return out;
}

function emit(seq: Node[], prog: Op[]): void {
  for (const n of seq) {
    if (n.k === 'char') prog.push({ op: 'char', c: n.c });
    else if (n.k === 'any') prog.push({ op: 'any' });
    else if (n.k === 'set') prog.push({ op: 'set', ranges: n.ranges, negated: n.negated });
    else if (n.k === 'star') {
      // L: split(L+1, out); any; jmp L; out:
      const l = prog.length;
      const split = { op: 'split' as const, x: l + 1, y: 0 };
      prog.push(split, { op: 'any' }, { op: 'jmp', x: l });
      split.y = prog.length;
    } else {
      // split(a1, split(a2, … an)); each alternative jumps to the end.
      const jumps: Array<{ op: 'jmp'; x: number }> = [];
      n.alts.forEach((alt, idx) => {
        const last = idx === n.alts.length - 1;
        const split = last ? undefined : { op: 'split' as const, x: prog.length + 1, y: 0 };
        if (split) prog.push(split);
        emit(alt, prog);
        const j = { op: 'jmp' as const, x: 0 };
        prog.push(j);
        jumps.push(j);
        if (split) split.y = prog.length;
      });
      for (const j of jumps) j.x = prog.length;
    }
  }
}

function inSet(c: string, op: { ranges: Array<[string, string]>; negated: boolean }): boolean {
  const hit = op.ranges.some(([a, b]) => c >= a && c <= b);
  return hit !== op.negated;
}

/** Compiles one glob (already lowercase). Never throws: what is not syntax is literal text. */
export function compileHostGlob(glob: string): CompiledGlob {
  let start = 0;
  while (glob[start] === '!') start++;
  const negated = start % 2 === 1;
  const prog: Op[] = [];
  emit(parseSeq(glob, start, glob.length), prog);
  prog.push({ op: 'match' });
  const size = prog.length;

  return {
    negated,
    size,
    inert: prog.some(
      (op) =>
        (op.op === 'char' && '[]{}'.includes(op.c)) ||
        (op.op === 'set' && ![...HOST_CHARACTERS].some((c) => inSet(c, op))),
    ),
    test(host, steps = { n: 0 }) {
      // Pike VM: the set of live states advances one character at a time; a state is added at
      // most once per position (mark), so the work is at most (host.length + 1) × size.
      const mark = new Int32Array(size).fill(-1);
      let current: number[] = [];
      let next: number[] = [];
      const add = (list: number[], pc: number, gen: number) => {
        const stack = [pc];
        while (stack.length) {
          const s = stack.pop()!;
          if (mark[s] === gen) continue;
          mark[s] = gen;
          steps.n++;
          const op = prog[s]!;
          if (op.op === 'jmp') stack.push(op.x);
          else if (op.op === 'split') stack.push(op.y, op.x);
          else list.push(s);
        }
      };
      add(current, 0, 0);
      for (let i = 0; i < host.length && current.length; i++) {
        const c = host[i]!;
        next = [];
        for (const s of current) {
          const op = prog[s]!;
          steps.n++;
          if (op.op === 'any' || (op.op === 'char' && op.c === c) || (op.op === 'set' && inSet(c, op)))
            add(next, s + 1, i + 1);
        }
        current = next;
      }
      const matched = current.some((s) => prog[s]!.op === 'match');
      return matched !== negated;
    },
  };
}

/** A list of globs as one predicate: true when any glob matches (picomatch's list semantics). */
export function hostGlobList(globs: readonly string[]): (host: string, steps?: { n: number }) => boolean {
  // Callers pass globs checked by canonicalGlob; one more pass costs nothing and holds if one did not.
  const compiled = globs.map((g) => compileHostGlob(canonicalGlob(g) ?? g.toLowerCase()));
  return (host, steps) => compiled.some((g) => g.test(host, steps));
}

/** The program sizes of a list, for the limits checked when a session is created. */
export function globProgramSizes(globs: readonly string[]): number[] {
  return globs.map((g) => compileHostGlob(g.toLowerCase()).size);
}

/** The index of the first glob that can match no host (CompiledGlob.inert), or -1. */
export function firstInertGlob(globs: readonly string[]): number {
  return globs.findIndex((g) => compileHostGlob(g.toLowerCase()).inert);
}

/** Glob syntax: a pattern with none of it names one host. */
const GLOB_SYNTAX = /[*?[\]{},!]/;
/** What a glob may be spelt with once canonical: host characters and glob syntax. */
const GLOB_TEXT = /^[a-z0-9.*?\-[\]{},!]{1,253}$/;

/**
 * A glob as hosts are matched (service-kit/host-name.ts), or undefined when it can name no host.
 * Without glob syntax it is a host, and its canonical form is the host's (`127.1`, `2130706433` and
 * `0x7f.0.0.1` are `127.0.0.1`; `Shop.Example.` is `shop.example`; `[::1]` is `::1`), else the
 * owner's block would block nothing and an allowance admit nothing. With syntax: lower case, no
 * root dot, a label of other letters in IDNA ASCII (`*.bücher.example` → `*.xn--bcher-kva.example`).
 * @example canonicalGlob('0177.0.0.1') // '127.0.0.1'
 */
export function canonicalGlob(glob: string): string | undefined {
  if (typeof glob !== 'string' || glob.length === 0 || glob.length > 253) return undefined;
  const bangs = /^!*/.exec(glob)![0];
  const rest = glob.slice(bangs.length);
  if (rest === '') return undefined;
  // `[::1]` is an IPv6 address in brackets, not a set: a set of hosts' characters holds no colon.
  if (!GLOB_SYNTAX.test(rest) || /^\[[0-9a-f:.]*:[0-9a-f:.]*\]$/i.test(rest)) {
    const host = canonicalHost(rest);
    // A name of host characters (no `_`, which the URL parser lets through), or an IPv6 address.
    if (host === undefined || !(/^[a-z0-9.-]+$/.test(host) || /^[0-9a-f:.]*:[0-9a-f:.]*$/.test(host))) return undefined;
    return bangs + host;
  }
  const lower = rest.toLowerCase();
  const bare = lower.length > 1 && lower.endsWith('.') ? lower.slice(0, -1) : lower;
  const labels = labelsOf(bare).map((l) =>
    GLOB_SYNTAX.test(l) || /^[a-z0-9-]+$/.test(l) ? l : domainToASCII(l) || undefined,
  );
  if (labels.some((l) => l === undefined)) return undefined;
  const out = bangs + labels.join('.');
  return GLOB_TEXT.test(out) ? out : undefined;
}

/** A glob's labels: split at the dots outside `{…}` and `[…]` (`{1..9}` is one range, not three labels). */
function labelsOf(glob: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let from = 0;
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i];
    if (c === '{' || c === '[') depth++;
    else if ((c === '}' || c === ']') && depth > 0) depth--;
    else if (c === '.' && depth === 0) {
      out.push(glob.slice(from, i));
      from = i + 1;
    }
  }
  out.push(glob.slice(from));
  return out;
}
