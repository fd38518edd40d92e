/**
 * Starts a Koa app on a port and closes it cleanly (tests listen on port 0 on 127.0.0.1).
 */
import type Koa from 'koa';
import type { AddressInfo } from 'node:net';
import { createServer, type Server } from 'node:http';
import type { Duplex } from 'node:stream';

export interface Listening {
  server: Server;
  port: number;
  /** `http://127.0.0.1:<port>` (or the host given) */
  url: string;
  /**
   * Stops accepting, lets the requests in flight finish, then resolves. Connections still busy
   * after `graceMs` (default 10 s) are cut, so a stuck client cannot hold a shutdown open.
   */
  close(options?: { graceMs?: number }): Promise<void>;
}

/** How long `close()` waits for requests in flight by default. */
export const DEFAULT_CLOSE_GRACE_MS = 10_000;

/** @example const srv = await listen(app, { port: 0 }); await fetch(srv.url + '/healthz'); await srv.close() */
export function listen(app: Koa<any, any>, options: { port?: number; host?: string } = {}): Promise<Listening> {
  const host = options.host ?? '127.0.0.1';
  const server = createServer(app.callback());
  server.on('clientError', answerClientError);
  server.on('connect', answerConnect);
  // Keep-alive clients (benchmarks, pooled fetch) must not hold close() open forever.
  server.keepAliveTimeout = 5000;
  let closing: Promise<void> | undefined;
  // Once closing, every answer ends its connection, so keep-alive sockets do not wait out their idle timeout.
  server.on('request', (_req, res) => {
    if (closing) res.shouldKeepAlive = false;
  });
  const close = (graceMs = DEFAULT_CLOSE_GRACE_MS) =>
    (closing ??= new Promise<void>((res, rej) => {
      const cut = setTimeout(() => server.closeAllConnections(), graceMs);
      cut.unref();
      server.close((e) => {
        clearTimeout(cut);
        e ? rej(e) : res();
      });
      // Requests already in flight: their socket closes right after the answer (not 5 s later).
      server.keepAliveTimeout = 1;
      server.closeIdleConnections();
    }));
  return new Promise((resolve, reject) => {
    const failed = (e: NodeJS.ErrnoException) => {
      // The one line an operator needs, not a stack: which port, and why.
      if (e.code === 'EADDRINUSE' || e.code === 'EACCES') {
        const why = e.code === 'EADDRINUSE' ? 'is already in use' : 'needs privileges this process lacks';
        reject(Object.assign(new Error(`port ${options.port} on ${host} ${why}`), { code: e.code }));
      } else reject(e);
    };
    server.once('error', failed);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', failed);
      const port = (server.address() as AddressInfo).port;
      resolve({
        server,
        port,
        url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
        close: (o) => close(o?.graceMs),
      });
    });
  });
}

/**
 * A CONNECT to a service port, which tunnels nothing (the gateway's egress proxy has its own
 * port): 405 with the JSON envelope, where Node would close the connection without a word.
 */
export function answerConnect(_req: unknown, socket: Duplex): void {
  const body = JSON.stringify({
    error: { code: 'method_not_allowed', message: 'this port does not tunnel: CONNECT is not allowed' },
  });
  socket.on('error', () => socket.destroy());
  socket.end(
    `HTTP/1.1 405 Method Not Allowed\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ` +
      `${Buffer.byteLength(body)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n${body}`,
    () => socket.destroy(),
  );
}

/**
 * What Node's HTTP parser refuses before the app sees the request (`Content-Length: -1`, a bad
 * header, a header block too large) is answered with the same JSON envelope as everything else,
 * not Node's bare `400 Bad Request`. Statuses stay the ones Node would send.
 * @example server.on('clientError', answerClientError)
 */
export function answerClientError(err: Error & { code?: string }, socket: Duplex): void {
  // A response already on the wire (pipelining) cannot be followed by ours without corrupting it.
  const inFlight = (socket as { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
  if (err.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) {
    socket.destroy();
    return;
  }
  const [status, reason, code, message] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'Request Header Fields Too Large', 'payload_too_large', 'the request headers are too large']
      : err.code === 'HPE_CHUNK_EXTENSIONS_OVERFLOW'
        ? [413, 'Payload Too Large', 'payload_too_large', 'the chunk extensions are too large']
        : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? [408, 'Request Timeout', 'malformed', 'the request was not received in time']
          : [
              400,
              'Bad Request',
              'malformed',
              'the request is not valid HTTP (request line, headers or Content-Length)',
            ];
  const body = JSON.stringify({ error: { code, message } });
  // Closed once written, so a client that never reads or closes cannot hold the socket.
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ` +
      `${Buffer.byteLength(body)}\r\n` +
      `Cache-Control: no-store\r\nConnection: close\r\n\r\n${body}`,
    () => socket.destroy(),
  );
}
