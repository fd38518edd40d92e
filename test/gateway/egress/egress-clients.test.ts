/**
 * The egress proxy with the clients agents are built on, run unmodified as processes: curl
 * (`-x`, `--proxy-user`, `--cacert`) and Python `requests` (HTTP_PROXY / HTTPS_PROXY,
 * REQUESTS_CA_BUNDLE). Each pays over HTTP and HTTPS and is refused past its session's ceiling.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { agentSession, proxyUrl, startStand, type Stand } from './stand.js';
import { PYTHON3, testsNeeding } from '../../helpers/system-packages.js';

const curlTest = testsNeeding('curl', 'the egress proxy with curl');
const requestsTest = testsNeeding('python3-requests', 'the egress proxy with Python requests');

let s: Stand;
test.before(async () => {
  s = await startStand();
});
test.after(async () => {
  await s?.close();
});

interface Answer {
  status: number;
  error: string | null;
  receipt: string | null;
  body: string;
}

/** Runs a program without blocking this process (the gateway under test answers in it). */
function run(file: string, args: string[], env: Record<string, string> = {}) {
  return new Promise<string>((resolve, reject) => {
    // The proxy variables are the test's own: none inherited, and NO_PROXY empty so 127.0.0.1 is proxied.
    const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/_proxy$/i.test(k)));
    execFile(file, args, { env: { ...clean, NO_PROXY: '', no_proxy: '', ...env }, timeout: 20_000 }, (e, out, err) =>
      e ? reject(new Error(`${file}: ${e.message}\n${err}`)) : resolve(out),
    );
  });
}

let n = 0;
async function curl(url: string, token: string): Promise<Answer> {
  const headersFile = join(s.dir, `curl-headers-${n++}.txt`);
  const out = await run('curl', [
    '-sS',
    '-x',
    `http://127.0.0.1:${s.proxyPort}`,
    '--proxy-user',
    `agent:${token}`,
    '--cacert',
    s.caFile,
    '-D',
    headersFile,
    '-w',
    '\n%{http_code}',
    url,
  ]);
  const status = Number(out.slice(out.lastIndexOf('\n') + 1));
  // Through a tunnel the file holds CONNECT's answer first: the last block is the response's.
  const blocks = readFileSync(headersFile, 'utf8')
    .trim()
    .split(/\r\n\r\n/);
  const head = blocks[blocks.length - 1]!;
  const header = (name: string) => new RegExp(`^${name}: (.*)$`, 'im').exec(head)?.[1]?.trim() ?? null;
  return {
    status,
    error: header('x-ctl-gateway-error'),
    receipt: header('x-ctl-receipt-id'),
    body: out.slice(0, out.lastIndexOf('\n')),
  };
}

const PYTHON = `
import json, sys, requests
out = []
for url in sys.argv[1:]:
    r = requests.get(url, timeout=15)
    out.append({"status": r.status_code, "error": r.headers.get("x-ctl-gateway-error"),
                "receipt": r.headers.get("x-ctl-receipt-id"), "body": r.text})
print(json.dumps(out))
`;

function expectPaidThenRefused(answers: Answer[], who: string) {
  const [a, b, c] = answers;
  assert.is(a!.status, 200, `${who} http: ${a!.body}`);
  assert.is(JSON.parse(a!.body).paid, true);
  assert.ok(a!.receipt, `${who}: a receipt id`);
  assert.is(b!.status, 200, `${who} https: ${b!.body}`);
  assert.is(JSON.parse(b!.body).paid, true);
  assert.is(c!.status, 402, `${who} past the ceiling: ${c!.body}`);
  assert.is(c!.error, 'budget_exceeded');
  assert.is(JSON.parse(c!.body).error.code, 'budget_exceeded');
}

curlTest('curl -x --proxy-user --cacert: pays over HTTP and HTTPS, refused past the ceiling', async () => {
  const { sessionToken } = await agentSession(s);
  const paidBefore = s.http.paid.length + s.https.paid.length;
  const answers = [];
  for (const url of [`${s.http.url}/search`, `${s.https.url}/search`, `${s.https.url}/search`])
    answers.push(await curl(url, sessionToken));
  expectPaidThenRefused(answers, 'curl');
  assert.is(s.http.paid.length + s.https.paid.length, paidBefore + 2);
  const invalid = await curl(`${s.http.url}/search`, 'gw_sess_nope');
  assert.is(invalid.status, 407);
  assert.is(invalid.error, 'unauthorized');
});

requestsTest('Python requests from HTTP(S)_PROXY and REQUESTS_CA_BUNDLE: pays, refused past the ceiling', async () => {
  const { sessionToken } = await agentSession(s);
  const proxy = proxyUrl(s, sessionToken);
  // Debian's python3-requests (.ci/run installs it) under Debian's interpreter, not a pip copy.
  const out = await run(
    PYTHON3,
    ['-c', PYTHON, `${s.http.url}/search`, `${s.https.url}/search`, `${s.https.url}/search`],
    { HTTP_PROXY: proxy, HTTPS_PROXY: proxy, REQUESTS_CA_BUNDLE: s.caFile },
  );
  expectPaidThenRefused(JSON.parse(out) as Answer[], 'requests');
});

test.run();
