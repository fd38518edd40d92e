/**
 * pino, with secrets redacted wherever they could appear in a logged object.
 */
import { pino, type Logger, type LoggerOptions } from 'pino';
import type { Middleware } from 'koa';

export type { Logger };

let stdout: pino.DestinationStream | undefined;

/**
 * One stdout stream for every logger of the process: with one buffer each, the authority's and
 * the gateway's lines under `ctl start` came out of time order. Flushed at exit by pino.
 */
function sharedStdout(): pino.DestinationStream {
  return (stdout ??= pino.destination({ dest: 1, sync: false }));
}

/** @example const logger = createLogger({ name: 'authority', level: process.env.LOG_LEVEL }) */
export function createLogger(
  options: { name: string; level?: string; destination?: pino.DestinationStream } & LoggerOptions,
): Logger {
  const { destination, ...rest } = options;
  const opts: LoggerOptions = {
    level: 'info',
    redact: {
      paths: [
        'req.headers.authorization',
        'headers.authorization',
        'apiKey',
        '*.apiKey',
        'privateKeyPem',
        '*.privateKeyPem',
        'secret',
        '*.secret',
      ],
      censor: '[redacted]',
    },
    ...rest,
  };
  if (!options.level) opts.level = 'info';
  return pino(opts, destination ?? sharedStdout());
}

/** A logger that drops everything, for tests and benches. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}

/**
 * One line per request at `info`: method, path, status, milliseconds. Paths in `quietPaths`
 * (high-volume reads such as a revocation check) are logged at `debug`, so the access log of a
 * busy authority is about changes, and the hot path does not pay for serialising a line.
 */
export function requestLogger(logger: Logger, options: { quietPaths?: string[] } = {}): Middleware {
  const quiet = new Set(options.quietPaths ?? []);
  return async (ctx, next) => {
    const started = performance.now();
    try {
      await next();
    } finally {
      const level = quiet.has(ctx.path) ? 'debug' : 'info';
      if (logger.isLevelEnabled(level)) {
        logger[level](
          {
            method: ctx.method,
            path: ctx.path,
            status: ctx.status,
            ms: Math.round((performance.now() - started) * 10) / 10,
          },
          'request',
        );
      }
    }
  };
}
