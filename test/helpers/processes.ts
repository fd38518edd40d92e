/**
 * Process trees on Linux, read from /proc: what a test that signals a service checks afterwards
 * (nothing left running, no zombie holding a port).
 */
import { readdirSync, readFileSync } from 'node:fs';

/** Every process whose ancestry leads to `pid`. @example descendants(child.pid!) */
export function descendants(pid: number): number[] {
  const parent = new Map<number, number>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      // /proc/<pid>/stat: "pid (comm) state ppid …"; comm may hold spaces and parentheses.
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      parent.set(Number(name), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      /* exited meanwhile */
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const [child, pp] of parent) if (pp === p) (out.push(child), walk(child));
  };
  walk(pid);
  return out;
}

/** `pid` and its command line, for a message. */
export function cmdline(pid: number): string {
  try {
    return `${pid} ${readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim()}`;
  } catch {
    return String(pid);
  }
}

/** Running, not a zombie: an exited child whose new parent never reaps it holds no port and runs no code. */
export function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}
