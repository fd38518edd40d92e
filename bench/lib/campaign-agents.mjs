// The agents of bench/campaign.mjs: each drives sessions of one store (PostgreSQL or SQLite)
// through whichever of that store's gateways is up, one logical request at a time, every
// request under its own Idempotency-Key (gateway README "Idempotency-Key"), retried under the same
// key whenever the answer is not final (the gateway died under it, the key is in flight, its
// payment is not settled yet). A request still not final after a few tries is parked and
// retried in the campaign's final phase, so one held x402 authorization never stalls a kill.
import http from 'node:http';
import { createSession, exchange } from './gateway-procs.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * POST /proxy; resolves with status, the gateway's error code and receipt id, or `{ error }` when the connection
 * failed.
 */
function proxy(agent, gatewayUrl, token, target, key) {
  const headers = {
    authorization: `Bearer ${token}`,
    'x-target-url': target,
    'x-target-method': 'GET',
    'x-ctl-purpose': 'api:search',
    'idempotency-key': key,
  };
  return exchange(agent, `${gatewayUrl}/proxy`, headers, 'POST').then(
    (r) => ({ status: r.status, code: r.headers['x-ctl-gateway-error'], receiptId: r.headers['x-ctl-receipt-id'] }),
    (e) => ({ error: e.code ?? e.message }),
  );
}

// Answers that say the request is not over: ask again under the same key.
const NOT_FINAL = new Set(['conflict', 'payment_unconfirmed', 'service_unavailable', 'internal_error']);

/** What one answer means for the request: `paid`, `refused` (a final refusal), or undefined (ask again). */
function outcomeOf(r) {
  if (r.error) return undefined;
  if (r.status === 200) return 'paid';
  // The key's payment was made but its answer was lost with the gateway: paid, receipt named.
  if (r.receiptId) return 'paid';
  if (!r.code || NOT_FINAL.has(r.code) || r.status >= 500) return undefined;
  return 'refused';
}

/**
 * `store`: { name, gateways: () => urls of the store's gateways now up, ownerKey, ceiling,
 * webhookUrl? }. `merchants`: target URL makers by kind. `rng` drives every choice.
 */
export function createAgents({
  store,
  merchants,
  rng,
  agents = 4,
  sessionsAtOnce = 6,
  webhookEvery = 2,
  triesBeforePark = 6,
}) {
  const tally = { requests: 0, paid: 0, refused: 0, retries: 0, parked: 0, sessions: [], byCode: {} };
  const parked = [];
  const httpAgent = new http.Agent({ keepAlive: true, maxSockets: agents * 2 });
  let seq = 0;
  let running = false;
  let paused = false;
  let inFlight = 0;
  const pool = [];

  const upGateway = () => {
    const up = store.gateways();
    return up.length ? up[Math.floor(rng() * up.length)] : undefined;
  };

  async function newSession() {
    for (;;) {
      const url = upGateway();
      if (url) {
        try {
          const extra =
            store.webhookUrl && tally.sessions.length % webhookEvery === 0 ? { webhookUrl: store.webhookUrl } : {};
          const s = await createSession(url, store.ownerKey, String(store.ceiling), extra);
          tally.sessions.push(s.sessionId);
          return { id: s.sessionId, token: s.sessionToken, exhausted: false };
        } catch {
          // the gateway went down under the call: another one, or the same once restarted
        }
      }
      await sleep(100);
    }
  }

  /** Asks under `r.key` until the answer is final or `tries` run out; true when final. */
  async function attempt(r, tries) {
    for (let i = 0; i < tries; i++) {
      const url = upGateway();
      if (url) {
        const a = await proxy(httpAgent, url, r.session.token, r.target, r.key);
        const o = outcomeOf(a);
        if (o) {
          tally[o]++;
          if (o === 'refused') {
            tally.byCode[a.code] = (tally.byCode[a.code] ?? 0) + 1;
            if (a.code === 'budget_exceeded' || a.code === 'session_paused') r.session.exhausted = true;
          }
          return true;
        }
      }
      tally.retries++;
      await sleep(100 + Math.floor(rng() * 200));
    }
    return false;
  }

  async function loop() {
    while (running) {
      if (paused) {
        await sleep(20);
        continue;
      }
      inFlight++;
      try {
        while (pool.length < sessionsAtOnce) pool.push(await newSession());
        const i = Math.floor(rng() * pool.length);
        const session = pool[i];
        const kind = rng() < 0.5 ? 'x402' : 'xpay';
        const id = `${store.name}-${++seq}`;
        const r = { key: `k-${id}`, session, target: merchants[kind](id) };
        tally.requests++;
        if (!(await attempt(r, triesBeforePark))) {
          tally.parked++;
          parked.push(r);
        }
        // A session at its ceiling is replaced: many sessions, each run to its ceiling.
        const at = pool.indexOf(session);
        if (session.exhausted && at >= 0) pool.splice(at, 1);
      } finally {
        inFlight--;
      }
    }
  }

  let loops = [];
  return {
    tally,
    start() {
      running = true;
      loops = Array.from({ length: agents }, () => loop());
    },
    /** Stops new requests and waits for those in flight to end (final or parked). */
    async pause() {
      paused = true;
      while (inFlight > 0) await sleep(20);
    },
    resume() {
      paused = false;
    },
    async stop() {
      running = false;
      await Promise.all(loops);
    },
    /** Retries every parked request until final or `deadline` (ms since epoch); answers how many are still open. */
    async finish(deadline) {
      while (parked.length && Date.now() < deadline) {
        const r = parked.shift();
        if (!(await attempt(r, 1))) parked.push(r);
      }
      return parked.length;
    },
    close: () => httpAgent.destroy(),
  };
}
