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
import { cborDecode, cborEncode } from '../src/encoding/cbor.js';
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
    return cborEncode({ id: r.id, ok: false, error: { code: 'internal', message: `unencodable result: ${(e as Error).message}` } });
  }
}

const errorOf = (e: unknown, fallback = 'internal') => {
  const x = e as { code?: unknown; message?: unknown };
  return { code: typeof x?.code === 'string' ? x.code : fallback, message: typeof x?.message === 'string' ? x.message : String(e) };
};

type Op = (device: Device, args: Record<string, any>) => unknown;

/** The operations a firmware may call (README.md § Operations). */
export const OPS: Record<string, Op> = {
  provisionRoot: (d, a) => d.provisionRoot({ rootPublicKeyPem: a['rootPublicKeyPem'] }),
  installBundle: (d, a) => d.installBundle({ bundle: a['bundle'] }),
  verify: (d, a) => d.verify({ sba: a['sba'], amount: a['amount'], currency: a['currency'], merchantId: a['merchantId'], rail: a['rail'], purpose: a['purpose'] }),
  provisionWallet: (d, a) => d.provisionWallet({ actorId: a['actorId'] }),
  installGrant: (d, a) => d.installGrant({ grant: a['grant'] }),
  createSba: (d, a) => d.createSba({ amount: a['amount'], currency: a['currency'], rail: a['rail'], merchantId: a['merchantId'], purpose: a['purpose'] }),
  status: (d, a) => d.status({ grantId: a['grantId'] }),
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
      return encodeResponse({ id, ok: false, error: { code: 'bad_frame', message: 'the payload must be a map { id, op, args }' } });
    }
    const r = req as Record<string, unknown>;
    if (typeof r['id'] === 'number' && Number.isSafeInteger(r['id']) && r['id'] >= 0) id = r['id'];
    else return encodeResponse({ id, ok: false, error: { code: 'bad_frame', message: 'id must be an unsigned integer' } });
    const op = r['op'];
    if (typeof op !== 'string' || !Object.prototype.hasOwnProperty.call(OPS, op)) {
      return encodeResponse({ id, ok: false, error: { code: 'unknown_op', message: `unknown op ${JSON.stringify(op)}` } });
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
 */
export function createFrameReader(maxBytes = MAX_FRAME_BYTES) {
  let buf = new Uint8Array(0);
  let skipping = 0;
  return {
    push(chunk: Uint8Array): Array<Uint8Array | { oversized: number }> {
      const out: Array<Uint8Array | { oversized: number }> = [];
      const joined = new Uint8Array(buf.length + chunk.length);
      joined.set(buf);
      joined.set(chunk, buf.length);
      let at = 0;
      for (;;) {
        if (skipping > 0) {
          const n = Math.min(skipping, joined.length - at);
          skipping -= n;
          at += n;
          if (skipping > 0) break;
          continue;
        }
        if (joined.length - at < 4) break;
        const len = new DataView(joined.buffer, joined.byteOffset + at, 4).getUint32(0);
        if (len > maxBytes) {
          out.push({ oversized: len });
          skipping = len;
          at += 4;
          continue;
        }
        if (joined.length - at - 4 < len) break;
        out.push(joined.slice(at + 4, at + 4 + len));
        at += 4 + len;
      }
      buf = joined.slice(at);
      return out;
    },
    /** Bytes of an incomplete frame still buffered. */
    pending(): number {
      return buf.length;
    },
  };
}

/** The response to an oversized frame. */
export function oversizedResponse(len: number, maxBytes = MAX_FRAME_BYTES): Uint8Array {
  return encodeResponse({ id: null, ok: false, error: { code: 'bad_frame', message: `frame of ${len} bytes is over the ${maxBytes}-byte limit` } });
}
