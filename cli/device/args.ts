/**
 * Argument parsing and file helpers shared by the device tooling (`ctl keygen`, `root`, `bundle`,
 * `verify`): `--name value`, `--flag`, repeated options, positionals. Unknown options are an
 * error (exit 2), never ignored: a typo must not silently verify against the wrong key.
 */
import { readFileSync, renameSync, writeFileSync, chmodSync } from 'node:fs';

export class UsageError extends Error {}

export interface Parsed {
  positionals: string[];
  options: Map<string, string[]>;
  flags: Set<string>;
}

/** @example parseArgs(['a.json', '--root', 'r.pem', '--explain'], { values: ['root'], flags: ['explain'] }) */
export function parseArgs(args: string[], spec: { values?: string[]; flags?: string[] }): Parsed {
  const out: Parsed = { positionals: [], options: new Map(), flags: new Set() };
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    // Single-dash flags are not part of this CLI: name them rather than take them as a file.
    if (/^-[^-]/.test(a)) throw new UsageError(`unknown option ${a}`);
    if (!a.startsWith('--')) {
      out.positionals.push(a);
      continue;
    }
    const [name, inline] = a.slice(2).split(/=(.*)/s, 2) as [string, string | undefined];
    if (spec.flags?.includes(name)) {
      if (inline !== undefined) throw new UsageError(`--${name} takes no value`);
      out.flags.add(name);
    } else if (spec.values?.includes(name)) {
      const v = inline ?? args[++i];
      if (v === undefined) throw new UsageError(`--${name} needs a value`);
      out.options.set(name, [...(out.options.get(name) ?? []), v]);
    } else {
      throw new UsageError(`unknown option --${name}`);
    }
  }
  return out;
}

export const one = (p: Parsed, name: string): string | undefined => p.options.get(name)?.at(-1);

export function required(p: Parsed, name: string): string {
  const v = one(p, name);
  if (v === undefined) throw new UsageError(`--${name} is required`);
  return v;
}

export function readText(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (e) {
    throw new UsageError(`cannot read ${what} ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
}

/** Writes through a temporary file and a rename, so a crash never leaves half a key or bundle. */
export function writeAtomic(path: string, content: string, mode = 0o644): void {
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, content, { mode });
  chmodSync(tmp, mode);
  renameSync(tmp, path);
}

/** `--now ISO` for reproducible runs; the wall clock otherwise. */
export function clock(p: Parsed): () => number {
  const v = one(p, 'now');
  if (v === undefined) return Date.now;
  const t = Date.parse(v);
  if (!Number.isFinite(t)) throw new UsageError(`--now: not a timestamp: ${v}`);
  return () => t;
}

/** Runs a subcommand body, turning usage errors into exit 2 with the usage text. */
export async function guard(usage: string, body: () => Promise<number | void>): Promise<number> {
  try {
    return (await body()) ?? 0;
  } catch (e) {
    if (e instanceof UsageError) {
      console.error(`${e.message}\n\n${usage}`);
      return 2;
    }
    throw e;
  }
}
