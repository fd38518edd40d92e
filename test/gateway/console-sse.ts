/**
 * A reader of the console's event stream (GET /console/events) for the tests, as the browser reads it: fetch +
 * Authorization.
 */
export interface SseEvent {
  event: string;
  data: any;
}

export interface SseStream {
  status: number;
  headers: Headers;
  body: any;
  events: SseEvent[];
  /** Resolves with the first event (seen or to come) matching, or rejects after `ms`. */
  waitFor(match: (e: SseEvent) => boolean, ms?: number): Promise<SseEvent>;
  /** Resolves when the stream ended: `clean` when the server ended the body, `cut` when the connection was cut. */
  ended: Promise<'clean' | 'cut'>;
  close(): void;
}

export async function openStream(base: string, key: string | undefined): Promise<SseStream> {
  const abort = new AbortController();
  const res = await fetch(`${base}/console/events`, {
    headers: key ? { authorization: `Bearer ${key}` } : {},
    signal: abort.signal,
  });
  const events: SseEvent[] = [];
  const waiters = new Set<() => void>();
  let ended: Promise<'clean' | 'cut'> = Promise.resolve('clean');
  let body: any;
  if (res.ok && res.body) {
    ended = (async () => {
      const reader = res.body!.getReader();
      const dec = new TextDecoder();
      let buf = '';
      let how: 'clean' | 'cut' = 'clean';
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += dec.decode(value, { stream: true });
          let i: number;
          while ((i = buf.indexOf('\n\n')) >= 0) {
            const block = buf.slice(0, i);
            buf = buf.slice(i + 2);
            const ev = /^event: (.*)$/m.exec(block)?.[1];
            const data = /^data: (.*)$/m.exec(block)?.[1];
            if (ev && data) {
              events.push({ event: ev, data: JSON.parse(data) });
              for (const w of waiters) w();
            }
          }
        }
      } catch {
        how = 'cut';
      }
      for (const w of waiters) w();
      return how;
    })();
  } else {
    body = JSON.parse(await res.text());
  }
  let done = false;
  void ended.then(() => (done = true));
  return {
    status: res.status,
    headers: res.headers,
    body,
    events,
    ended,
    waitFor(match, ms = 5000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const hit = events.find(match);
          if (hit) {
            waiters.delete(check);
            clearTimeout(t);
            resolve(hit);
          } else if (done) {
            waiters.delete(check);
            clearTimeout(t);
            reject(new Error(`stream ended without the event; saw ${JSON.stringify(events)}`));
          }
        };
        const t = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no such event in ${ms} ms; saw ${JSON.stringify(events)}`));
        }, ms);
        waiters.add(check);
        check();
      });
    },
    close: () => abort.abort(),
  };
}
