/**
 * The live feed (GET /console/events): Server-Sent Events read with fetch() streaming, because
 * EventSource cannot send the Authorization header and the key must never be in a URL.
 * Reconnects with backoff; every (re)connection and every `resync` asks the page to reload what
 * it shows, so an event missed while disconnected costs a refresh, never a stale page.
 */
export interface LiveEvent {
  type: string;
  sessionId: string;
  at: string;
  [k: string]: unknown;
}

export type LiveStatus = 'connecting' | 'live' | 'reconnecting' | 'busy';

export interface LiveHandlers {
  event(e: LiveEvent): void;
  resync(): void;
  status(s: LiveStatus, detail?: string): void;
  unauthorized(): void;
}

/** @example const stop = connectLive(key, handlers); stop() */
export function connectLive(key: string, on: LiveHandlers): () => void {
  const abort = new AbortController();
  let delay = 1000;
  let stopped = false;

  async function run() {
    while (!stopped) {
      on.status('connecting');
      let retryAfter = 0;
      try {
        const res = await fetch('/console/events', {
          headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream' },
          signal: abort.signal,
          cache: 'no-store',
        });
        if (res.status === 401 || res.status === 403) return on.unauthorized();
        if (res.status === 429) {
          retryAfter = Number(res.headers.get('retry-after') ?? 10) * 1000;
          on.status('busy', 'Too many open console tabs for this owner: live updates paused.');
          await res.body?.cancel();
        } else if (res.ok && res.body) {
          delay = 1000;
          await read(res.body);
        }
      } catch (e) {
        if (stopped) return;
      }
      if (stopped) return;
      on.status('reconnecting');
      await new Promise((r) => setTimeout(r, Math.max(retryAfter, delay)));
      delay = Math.min(delay * 2, 30_000);
    }
  }

  async function read(body: ReadableStream<Uint8Array>) {
    const reader = body.getReader();
    const text = new TextDecoder();
    let buf = '';
    let event = 'message';
    let data = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += text.decode(value, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl).replace(/\r$/, '');
        buf = buf.slice(nl + 1);
        if (line === '') {
          if (data) dispatch(event, data.slice(0, -1));
          event = 'message';
          data = '';
        } else if (line.startsWith('event:')) event = line.slice(6).trim();
        else if (line.startsWith('data:')) data += line.slice(5).replace(/^ /, '') + '\n';
      }
    }
  }

  function dispatch(event: string, data: string) {
    let payload: any;
    try {
      payload = JSON.parse(data);
    } catch {
      return;
    }
    if (event === 'ready') {
      on.status('live', payload.mode);
      on.resync();
    } else if (event === 'session') on.event(payload as LiveEvent);
    else if (event === 'resync') on.resync();
    else if (event === 'end' && payload.reason === 'unauthorized') {
      stopped = true;
      on.unauthorized();
    }
  }

  void run();
  return () => {
    stopped = true;
    abort.abort();
  };
}
