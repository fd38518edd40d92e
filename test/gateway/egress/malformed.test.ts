/**
 * What HTTP's parser refuses gets the same answer on the egress port as on the main port (and
 * inside a decrypted tunnel): 400 `malformed` for a bad request line, 431 for a header block too
 * large, never a silently dropped connection; a CONNECT whose target is no `host:port` is 400
 * before any credential is asked for, and the main port, which tunnels nothing, says so.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { connect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { agentSession, startStand, type Stand } from './stand.js';

let s: Stand;
let mainPort: number;
test.before(async () => {
  s = await startStand();
  mainPort = Number(new URL(s.url).port);
});
test.after(async () => {
  await s?.close();
});

/** Writes `text` on a fresh connection (or `over`), reads until the peer closes: status, head, body. */
function exchange(port: number, text: string, over?: Socket) {
  return new Promise<{ status: number; head: string; body: string }>((resolve) => {
    const sock = over ?? connect(port, '127.0.0.1');
    let out = '';
    const timer = setTimeout(() => sock.destroy(), 5000);
    sock.on('data', (c) => (out += c.toString('latin1')));
    sock.on('error', () => {});
    sock.on('close', () => {
      clearTimeout(timer);
      const [head = '', body = ''] = out.split('\r\n\r\n');
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(out)?.[1] ?? 0), head, body });
    });
    if (over) sock.write(text);
    else sock.on('connect', () => sock.write(text));
  });
}

const errorCode = (body: string) => (JSON.parse(body) as { error: { code: string } }).error.code;

const CASES: [string, string, number, string][] = [
  ['a bad request line', 'GARBAGE\r\n\r\n', 400, 'malformed'],
  ['a space in the target', 'GET http://a b/ HTTP/1.1\r\nHost: a\r\n\r\n', 400, 'malformed'],
  ['a bad header', 'GET http://a.test/ HTTP/1.1\r\nHost: a\r\nBad Header: x\r\n\r\n', 400, 'malformed'],
  [
    'headers too large',
    `GET http://a.test/ HTTP/1.1\r\nHost: a\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
    431,
    'payload_too_large',
  ],
];

for (const [what, text, status, code] of CASES) {
  test(`${what}: ${status} on the main port and the egress port alike`, async () => {
    const main = await exchange(mainPort, text);
    const egress = await exchange(s.proxyPort, text);
    assert.is(main.status, status, `main: ${main.head}`);
    assert.is(egress.status, status, `egress: ${egress.head}`);
    assert.is(errorCode(egress.body), code);
    assert.is(egress.body, main.body, 'the same answer');
  });
}

test('a CONNECT target that is no host:port: 400 before credentials are asked for', async () => {
  for (const target of ['nonsense', '/path', 'host.test:99999', 'host.test:', '[::1:443', 'user@host.test:443']) {
    const r = await exchange(s.proxyPort, `CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
    assert.is(r.status, 400, `${target}: ${r.head}`);
    assert.is(errorCode(r.body), 'malformed', target);
  }
});

test('the main port answers a CONNECT instead of dropping it', async () => {
  const r = await exchange(mainPort, 'CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n');
  assert.is(r.status, 405, r.head);
  assert.is(errorCode(r.body), 'method_not_allowed');
});

test('inside a decrypted tunnel, a bad request gets its 400 too', async () => {
  const { sessionToken } = await agentSession(s);
  const raw = connect(s.proxyPort, '127.0.0.1');
  const auth = Buffer.from(`agent:${sessionToken}`).toString('base64');
  raw.write(`CONNECT 127.0.0.1:${s.https.port} HTTP/1.1\r\nProxy-Authorization: Basic ${auth}\r\n\r\n`);
  await new Promise((r) => raw.once('data', r));
  const secure = tlsConnect({ socket: raw, ca: s.caPem, host: '127.0.0.1' });
  await new Promise((r) => secure.once('secureConnect', r));
  const r = await exchange(0, 'GARBAGE\r\n\r\n', secure);
  assert.is(r.status, 400, r.head);
  assert.is(errorCode(r.body), 'malformed');
});

test.run();
