/**
 * A PostgreSQL primary and a synchronous streaming standby of their own on this machine, for the
 * failover campaign (test/resilience/failover.slow.test.ts): two clusters made with Debian's
 * PostgreSQL binaries (initdb, pg_basebackup -R) in a temporary directory, on ports of their own,
 * never the shared server on 5432. The primary waits for the standby's flush before a COMMIT
 * returns (synchronous_standby_names), so what a gateway was told is committed survives the
 * primary; `killPrimary` is a SIGKILL of the primary's whole process tree, `promote` is
 * `pg_ctl promote` (docs/operations.md "A standby and failover").
 */
import { execFileSync, spawnSync } from 'node:child_process';
import {
  appendFileSync,
  chmodSync,
  chownSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './ports.js';
import { descendants } from './processes.js';

/** Where Debian's postgresql-<major> package puts its server binaries; the newest major found. */
export function postgresBin(): string | undefined {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const majors = readdirSync(root)
    .filter((d) => /^\d+$/.test(d) && existsSync(join(root, d, 'bin', 'pg_basebackup')))
    .sort((a, b) => Number(b) - Number(a));
  return majors[0] ? join(root, majors[0], 'bin') : undefined;
}

export interface ReplicatedPair {
  primaryPort: number;
  standbyPort: number;
  /** Both hosts, the primary first, as gateways are configured. */
  multiHostUrl: string;
  primaryUrl: string;
  standbyUrl: string;
  /** SIGKILL of the primary's postmaster and every backend: the machine is gone. */
  killPrimary(): void;
  /** `pg_ctl promote -w` on the standby: resolves once it accepts writes; the time it took (ms). */
  promote(): number;
  /** Stops both clusters (immediate) and removes their directory. */
  close(): void;
}

/** The uid and gid commands run as: PostgreSQL refuses to run as root. */
function serverUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('postgres:'));
  if (!line) throw new Error('running as root and there is no postgres user to run PostgreSQL as');
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

/**
 * Makes, starts and links the two clusters. Database `postgres`, user `postgres`, trust on
 * 127.0.0.1 only. Throws with the tool's output when a step fails.
 * @example
 * const pair = await startReplicatedPair();
 * try { pair.killPrimary(); pair.promote() } finally { pair.close() }
 */
export async function startReplicatedPair(bin = postgresBin()): Promise<ReplicatedPair> {
  if (!bin) throw new Error('no PostgreSQL server binaries under /usr/lib/postgresql (Debian postgresql)');
  const user = serverUser();
  const dir = mkdtempSync(join(tmpdir(), 'ctl-pg-pair-'));
  if (user) chownSync(dir, user.uid, user.gid);
  chmodSync(dir, 0o700);
  const primary = join(dir, 'primary');
  const standby = join(dir, 'standby');
  const [primaryPort, standbyPort] = [await freePort(), await freePort()];
  const run = (tool: string, args: string[]) => {
    const cmd = user ? 'runuser' : join(bin, tool);
    const argv = user ? ['-u', 'postgres', '--', join(bin, tool), ...args] : args;
    const r = spawnSync(cmd, argv, { cwd: dir, encoding: 'utf8', timeout: 60_000 });
    if (r.status !== 0) throw new Error(`${tool} ${args.join(' ')}: ${r.error?.message ?? ''}${r.stderr}${r.stdout}`);
    return r.stdout;
  };
  const conf = (dataDir: string, lines: string[]) =>
    appendFileSync(join(dataDir, 'postgresql.auto.conf'), `${lines.join('\n')}\n`);
  const pair: ReplicatedPair = {
    primaryPort,
    standbyPort,
    multiHostUrl:
      `postgres://postgres@127.0.0.1:${primaryPort},127.0.0.1:${standbyPort}/postgres` +
      '?target_session_attrs=read-write',
    primaryUrl: `postgres://postgres@127.0.0.1:${primaryPort}/postgres`,
    standbyUrl: `postgres://postgres@127.0.0.1:${standbyPort}/postgres`,
    killPrimary() {
      const pid = Number(readFileSync(join(primary, 'postmaster.pid'), 'utf8').split('\n')[0]);
      for (const p of [pid, ...descendants(pid)]) {
        try {
          process.kill(p, 'SIGKILL');
        } catch {
          /* gone already */
        }
      }
    },
    promote() {
      const t = performance.now();
      run('pg_ctl', ['-D', standby, '-w', '-t', '60', 'promote']);
      return performance.now() - t;
    },
    close() {
      process.off('exit', onExit);
      for (const d of [standby, primary])
        if (existsSync(join(d, 'postmaster.pid')))
          spawnSync(...stopArgs(user, bin, d), { stdio: 'ignore', timeout: 30_000 });
      rmSync(dir, { recursive: true, force: true });
    },
  };
  // A test process that ends without its finally (an assertion in a callback, a timeout) leaves
  // no cluster running.
  const onExit = () => pair.close();
  process.once('exit', onExit);
  try {
    run('initdb', ['-D', primary, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8', '--locale=C']);
    conf(primary, [
      `port = ${primaryPort}`,
      "listen_addresses = '127.0.0.1'",
      `unix_socket_directories = '${dir}'`,
      'max_connections = 60',
      'shared_buffers = 32MB',
      'max_wal_senders = 4',
      // A COMMIT returns once the standby has flushed it: what a client heard of survives the primary.
      "synchronous_standby_names = 'FIRST 1 (standby1)'",
      'synchronous_commit = on',
    ]);
    run('pg_ctl', ['-D', primary, '-l', join(dir, 'primary.log'), '-w', '-t', '60', 'start']);
    run('pg_basebackup', [
      '-h',
      '127.0.0.1',
      '-p',
      String(primaryPort),
      '-U',
      'postgres',
      '-D',
      standby,
      '-R',
      '-X',
      'stream',
    ]);
    // The copy carries the primary's settings: its own port, its name as the primary knows it,
    // and no synchronous standby of its own (once promoted it would wait for one forever).
    conf(standby, [`port = ${standbyPort}`, "cluster_name = 'standby1'", "synchronous_standby_names = ''"]);
    run('pg_ctl', ['-D', standby, '-l', join(dir, 'standby.log'), '-w', '-t', '60', 'start']);
    // Synchronous from here: the primary lists the standby as `sync`.
    for (let i = 0; ; i++) {
      const state = run('psql', [
        '-h',
        '127.0.0.1',
        '-p',
        String(primaryPort),
        '-U',
        'postgres',
        '-d',
        'postgres',
        '-tAc',
        'SELECT sync_state FROM pg_stat_replication',
      ]).trim();
      if (state === 'sync') break;
      if (i > 100) throw new Error(`the standby did not become synchronous (sync_state '${state}')`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } catch (e) {
    pair.close();
    throw e;
  }
  return pair;
}

function stopArgs(user: { uid: number } | undefined, bin: string, dataDir: string): [string, string[]] {
  const args = ['-D', dataDir, '-m', 'immediate', '-w', 'stop'];
  return user ? ['runuser', ['-u', 'postgres', '--', join(bin, 'pg_ctl'), ...args]] : [join(bin, 'pg_ctl'), args];
}

/** Whether this machine can stand the pair up: the binaries, and a user to run them as. */
export function replicatedPairMissing(): string | undefined {
  if (!postgresBin()) return 'no /usr/lib/postgresql/<major>/bin/pg_basebackup (Debian postgresql)';
  try {
    serverUser();
  } catch (e) {
    return (e as Error).message;
  }
  if (process.getuid?.() === 0) {
    try {
      execFileSync('runuser', ['--help'], { stdio: 'ignore' });
    } catch {
      return 'running as root without runuser (util-linux)';
    }
  }
  return undefined;
}
