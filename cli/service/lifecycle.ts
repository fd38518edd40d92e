/**
 * How `ctl authority`, `ctl gateway` and `ctl start` run and stop: on SIGTERM or SIGINT the
 * service stops accepting, lets requests in flight finish (service-kit/listen.ts, at most 10 s),
 * closes its database and the process exits 0. A failure to start is one line, not a stack.
 */
import type { Logger } from '../../service-kit/index.js';

/** Above the 10 s drain of listen.ts: time for the database and queues to close after it. */
const STOP_DEADLINE_MS = 15_000;

/**
 * Waits for SIGTERM or SIGINT, then runs `stop` and exits: 0 when it finished, 1 when it failed or
 * took longer than the deadline. Further signals while stopping are ignored: Ctrl-C under
 * `npm start` delivers SIGINT twice at once (from the terminal to the process group, and
 * forwarded by npm), and the second must not cut the requests the first lets finish.
 * @example await runUntilSignal(logger, () => service.close())
 */
export function runUntilSignal(logger: Logger, stop: () => Promise<void>): Promise<never> {
  return new Promise<never>(() => {
    let stopping = false;
    const onSignal = (signal: NodeJS.Signals) => {
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
  });
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
  return 1;
}
