/**
 * The framed request/response protocol between firmware and the bridge (README.md § Frames):
 * over any byte stream (UART, pipe, socket), each message is
 *
 *     length: uint32 big-endian  ||  payload: `length` bytes of deterministic CBOR (RFC 8949 §4.2.1)
 *
 * Request payload  { id: uint, op: text, args?: map }
 * Response payload { id: uint | null, ok: true, result: any } | { id, ok: false, error: { code, message } }
 *
 * Nothing a peer sends can crash the bridge: an unreadable frame gets an error frame
 * (`bad_frame`), an oversized one is skipped by its declared length, then answered the same way.
 */
import { cborDecode, cborEncode } from '../src/entries/compact.js';
import type { Device } from './device.js';

/** Largest payload accepted (a bundle with hundreds of keys fits; a UART peer cannot exhaust memory). */
export const MAX_FRAME_BYTES = 256 * 1024;

export interface Response {
  id: number | null;
  ok: boolean;
  result?: unknown;
  error?: { code: string; message: string };
}

/** Prefixes a payload with its length. @example frame(cborEncode({ id: 1, op: 'status' })) */
export function frame(payload: Uint8Array): Uint8Array {
  const out = new Uint8Array(4 + payload.length);
  new DataView(out.buffer).setUint32(0, payload.length);
  out.set(payload, 4);
  return out;
}

/** Drops `undefined` members (CBOR has no such value here) and copies the rest. */
function clean(v: unknown): unknown {
  if (v === undefined || v === null || typeof v !== 'object' || v instanceof Uint8Array) return v;
  if (Array.isArray(v)) return v.map(clean);
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) if (x !== undefined) out[k] = clean(x);
  return out;
}

/** The CBOR payload of a response; never throws (an unencodable result becomes an `internal` error). */
export function encodeResponse(r: Response): Uint8Array {
  try {
    return cborEncode(clean(r));
  } catch (e) {
    return cborEncode({
      id: r.id,
      ok: false,
      error: { code: 'internal', message: `unencodable result: ${(e as Error).message}` },
    });
  }
}

const errorOf = (e: unknown, fallback = 'internal') => {
  const x = e as { code?: unknown; message?: unknown };
  return {
    code: typeof x?.code === 'string' ? x.code : fallback,
    message: typeof x?.message === 'string' ? x.message : String(e),
  };
};

type Op = (device: Device, args: Record<string, any>) => unknown;

/** The operations a firmware may call (README.md § Operations). */
export const OPS: Record<string, Op> = {
  provisionRoot: (d, a) => d.provisionRoot({ rootPublicKeyPem: a['rootPublicKeyPem'] }),
  installBundle: (d, a) => d.installBundle({ bundle: a['bundle'], rootChain: a['rootChain'] }),
  updateRoot: (d, a) => d.updateRoot({ rootChain: a['rootChain'] }),
  verify: (d, a) =>
    d.verify({
      sba: a['sba'],
      amount: a['amount'],
      currency: a['currency'],
      merchantId: a['merchantId'],
      rail: a['rail'],
      purpose: a['purpose'],
    }),
  capture: (d, a) => d.capture({ holdId: a['holdId'], sba: a['sba'], amount: a['amount'] }),
  provisionWallet: (d, a) => d.provisionWallet({ actorId: a['actorId'] }),
  installGrant: (d, a) => d.installGrant({ grant: a['grant'] }),
  createSba: (d, a) =>
    d.createSba({
      amount: a['amount'],
      currency: a['currency'],
      rail: a['rail'],
      merchantId: a['merchantId'],
      purpose: a['purpose'],
      hold: a['hold'],
    }),
  settleHold: (d, a) => d.settleHold({ budgetId: a['budgetId'], amount: a['amount'] }),
  status: (d, a) => d.status({ grantId: a['grantId'] }),
  provisionLog: (d, a) =>
    d.provisionLog({
      logKeys: a['logKeys'],
      witnessKeys: a['witnessKeys'],
      requireCosignatures: a['requireCosignatures'],
    }),
  verifyLogProof: (d, a) =>
    d.verifyLogProof({ proof: a['proof'], receipt: a['receipt'], type: a['type'], entry: a['entry'] }),
  ping: () => ({ pong: true }),
};

/**
 * One request payload in, one response payload out. Never rejects.
 * @example const out = await handlePayload(device, cborEncode({ id: 7, op: 'status' }))
 */
export async function handlePayload(device: Device, payload: Uint8Array): Promise<Uint8Array> {
  let id: number | null = null;
  try {
    let req: unknown;
    try {
      req = cborDecode(payload);
    } catch (e) {
      return encodeResponse({ id, ok: false, error: { code: 'bad_frame', message: errorOf(e).message } });
    }
    if (typeof req !== 'object' || req === null || Array.isArray(req) || req instanceof Uint8Array) {
      return encodeResponse({
        id,
        ok: false,
        error: { code: 'bad_frame', message: 'the payload must be a map { id, op, args }' },
      });
    }
    const r = req as Record<string, unknown>;
    if (typeof r['id'] === 'number' && Number.isSafeInteger(r['id']) && r['id'] >= 0) id = r['id'];
    else
      return encodeResponse({ id, ok: false, error: { code: 'bad_frame', message: 'id must be an unsigned integer' } });
    const op = r['op'];
    if (typeof op !== 'string' || !Object.prototype.hasOwnProperty.call(OPS, op)) {
      return encodeResponse({
        id,
        ok: false,
        error: { code: 'unknown_op', message: `unknown op ${JSON.stringify(op)}` },
      });
    }
    const args = r['args'] ?? {};
    if (typeof args !== 'object' || args === null || Array.isArray(args) || args instanceof Uint8Array) {
      return encodeResponse({ id, ok: false, error: { code: 'bad_request', message: 'args must be a map' } });
    }
    const result = await OPS[op]!(device, args as Record<string, unknown>);
    return encodeResponse({ id, ok: true, result });
  } catch (e) {
    return encodeResponse({ id, ok: false, error: errorOf(e) });
  }
}

/**
 * Splits a byte stream into frames. `push` returns the complete payloads and, for a frame whose
 * declared length is over the limit, a marker: its bytes are skipped as they arrive, so the stream
 * stays in step and the peer gets an error frame instead of a hang.
 *
 * Linear in the bytes pushed, however they are cut (a UART delivers a few bytes at a time): each
 * byte is copied once into the frame being assembled, whose buffer grows by doubling up to the
 * declared length (never allocated up front: a peer's length prefix alone costs no memory).
 */
export function createFrameReader(maxBytes = MAX_FRAME_BYTES) {
  const head = new Uint8Array(4);
  let headLen = 0;
  let body: Uint8Array | null = null; // the payload being assembled, when a header has been read
  let want = 0; // its declared length
  let have = 0; // bytes of it received
  let skipping = 0;
  return {
    push(chunk: Uint8Array): Array<Uint8Array | { oversized: number }> {
      const out: Array<Uint8Array | { oversized: number }> = [];
      let at = 0;
      while (at < chunk.length) {
        if (skipping > 0) {
          const n = Math.min(skipping, chunk.length - at);
          skipping -= n;
          at += n;
          continue;
        }
        if (body === null) {
          head[headLen++] = chunk[at++]!;
          if (headLen < 4) continue;
          headLen = 0;
          const len = ((head[0]! << 24) | (head[1]! << 16) | (head[2]! << 8) | head[3]!) >>> 0;
          if (len > maxBytes) {
            out.push({ oversized: len });
            skipping = len;
          } else if (chunk.length - at >= len) {
            out.push(chunk.slice(at, at + len)); // whole payload in this chunk: one copy
            at += len;
          } else {
            want = len;
            have = 0;
            body = new Uint8Array(Math.min(len, Math.max(256, chunk.length - at)));
          }
          continue;
        }
        const n = Math.min(want - have, chunk.length - at);
        if (have + n > body.length) {
          const grown = new Uint8Array(Math.min(want, Math.max(have + n, body.length * 2)));
          grown.set(body.subarray(0, have));
          body = grown;
        }
        body.set(chunk.subarray(at, at + n), have);
        have += n;
        at += n;
        if (have === want) {
          out.push(body.length === want ? body : body.slice(0, want));
          body = null;
        }
      }
      return out;
    },
    /** Bytes of an incomplete frame still buffered (its length prefix included). */
    pending(): number {
      return body === null ? headLen : 4 + have;
    },
  };
}

/** The response to an oversized frame. */
export function oversizedResponse(len: number, maxBytes = MAX_FRAME_BYTES): Uint8Array {
  return encodeResponse({
    id: null,
    ok: false,
    error: { code: 'bad_frame', message: `frame of ${len} bytes is over the ${maxBytes}-byte limit` },
  });
}
