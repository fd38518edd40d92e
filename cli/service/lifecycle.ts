/**
 * How `ctl authority`, `ctl gateway` and `ctl start` run and stop: on SIGTERM or SIGINT the
 * service stops accepting, lets requests in flight finish (service-kit/listen.ts, at most 10 s),
 * closes its database and the process exits 0. A failure to start is one line, not a stack.
 */
import { readFileSync } from 'node:fs';
import type { Logger } from '../../service-kit/index.js';
import { ConfigError, checkDatabaseReachable, type ConfigWarning } from '../../service-kit/config.js';
import { RollbackRefusedError } from '../../service-kit/rollback-guard.js';

/** Above the 10 s drain of listen.ts: time for the database and queues to close after it. */
const STOP_DEADLINE_MS = 15_000;

/** A signal that came while a service was starting (holdSignalsWhileStarting). */
let signalledWhileStarting: string | undefined;
const rememberSignal = (signal: string) => {
  signalledWhileStarting ??= signal;
};

/**
 * Called before a service starts: a SIGTERM or SIGINT that comes while it starts (a supervisor
 * that stops what it just started) is held, and stops the service cleanly once it is up
 * (runUntilSignal), instead of killing it half-started.
 */
export function holdSignalsWhileStarting(): void {
  process.on('SIGTERM', rememberSignal);
  process.on('SIGINT', rememberSignal);
}

/**
 * Waits for SIGTERM or SIGINT (or takes one held while starting), then runs `stop` and exits: 0
 * when it finished, 1 when it failed or took longer than the deadline. Further signals while
 * stopping are ignored: Ctrl-C under `npm start` delivers SIGINT twice at once (from the terminal
 * to the process group, and forwarded by npm), and the second must not cut the requests the first
 * lets finish.
 * @example await runUntilSignal(logger, () => service.close())
 */
export function runUntilSignal(logger: Logger, stop: () => Promise<void>): Promise<never> {
  return new Promise<never>(() => {
    let stopping = false;
    const onSignal = (signal: string) => {
      if (stopping) return;
      stopping = true;
      logger.info({ signal }, 'stopping: no new connections, finishing requests in flight');
      const deadline = setTimeout(() => {
        logger.error({ ms: STOP_DEADLINE_MS }, 'stop did not finish in time: exiting');
        process.exit(1);
      }, STOP_DEADLINE_MS);
      deadline.unref();
      stop().then(
        () => {
          logger.info('stopped');
          process.exit(0);
        },
        (err: unknown) => {
          logger.error({ err }, 'stop failed');
          process.exit(1);
        },
      );
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
    process.off('SIGTERM', rememberSignal);
    process.off('SIGINT', rememberSignal);
    if (signalledWhileStarting !== undefined) onSignal(signalledWhileStarting);
    watchWrapperShell(() => onSignal('SIGTERM to npm (its shell exited)'));
  });
}

/** The parent's pid as it is now (`process.ppid` is read once at start in some Node versions). */
function parentPid(): number | undefined {
  try {
    // "pid (comm) state ppid …": comm may hold spaces and parentheses.
    const stat = readFileSync('/proc/self/stat', 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return undefined;
  }
}

/**
 * The shell npm started this process through, read when the module loads: the shell may be gone before the service is
 * up.
 */
const wrapperShell = ((): number | undefined => {
  if (!process.env['npm_lifecycle_event']) return undefined;
  const parent = parentPid();
  try {
    const comm = readFileSync(`/proc/${parent}/comm`, 'utf8').trim();
    return /^(sh|dash|bash|ash|zsh|ksh|mksh)$/.test(comm) ? parent : undefined;
  } catch {
    return undefined;
  }
})();

/** How often the wrapper shell is looked for: a stop starts at most this long after the supervisor's signal. */
const WRAPPER_POLL_MS = 200;

/**
 * `npx ctl-gateway` (npm exec) runs `npm → sh -c ctl-gateway → node`: npm passes a supervisor's
 * SIGTERM to that shell, and dash (Debian's /bin/sh) dies of it without passing it on, which
 * would leave the service running with its port and database. So when npm started this process
 * through a shell, the shell's exit is taken as the stop signal. Only then: a service started from
 * a terminal or a script (`ctl-gateway &`) keeps running when that parent exits. Linux (/proc).
 */
function watchWrapperShell(stop: () => void): void {
  if (wrapperShell === undefined) return;
  const timer = setInterval(() => {
    if (parentPid() === wrapperShell) return;
    clearInterval(timer);
    stop();
  }, WRAPPER_POLL_MS);
  timer.unref();
}

/**
 * The one line a failed start prints, exit 1 (`ctl gateway: port 8402 on 127.0.0.1 is already in
 * use`): the operator needs the reason, not a stack. LOG_LEVEL=debug (or trace) adds the stack,
 * for the rare failure that is a bug.
 */
export function startFailure(program: string, e: unknown): number {
  const err = e instanceof Error ? e : new Error(String(e));
  console.error(`${program}: ${err.message}`);
  if (/^(debug|trace)$/.test(process.env.LOG_LEVEL ?? '') && err.stack) console.error(err.stack);
  // A variable set wrongly is a configuration mistake (docs/operations.md: exit 2), not a failure.
  // A database behind its high-water mark waits for the operator (docs/operations.md: exit 3).
  if (err instanceof RollbackRefusedError) return 3;
  return err instanceof ConfigError ? 2 : 1;
}

/**
 * The checks that need I/O, before a service opens anything: a PostgreSQL that cannot be
 * reached refuses the start naming `variable` (exit 2). Returns the exit code, or undefined to go on.
 * @example const code = await preflight('ctl gateway', options.databaseUrl); if (code !== undefined) return code
 */
export async function preflight(
  program: string,
  databaseUrl: string,
  variable = 'DATABASE_URL',
): Promise<number | undefined> {
  try {
    await checkDatabaseReachable(databaseUrl, variable);
    return undefined;
  } catch (e) {
    return startFailure(program, e);
  }
}

/** Without a bootstrap key nobody can create the first owner or key: said once at start, not discovered by a 401. */
export function warnNoAdminKey(logger: Logger, variable: string, what: string): void {
  logger.warn(
    { variable },
    `${variable} is not set: ${what} until it is (set it to a random string of at least 16 characters and restart)`,
  );
}

/**
 * The CTL_* variables of the environment that nothing reads (service-kit/config.ts
 * checkVariableNames): one warning each, naming the nearest known name.
 * @example warnUnknownVariables(running.logger, options.warnings)
 */
export function warnUnknownVariables(logger: Logger, warnings: readonly ConfigWarning[] | undefined): void {
  for (const w of warnings ?? [])
    logger.warn({ variable: w.variable, ...(w.nearest ? { nearest: w.nearest } : {}) }, `${w.variable}: ${w.message}`);
}
