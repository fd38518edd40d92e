/**
 * The log over HTTP, the same in both services:
 *
 * - `GET /log/checkpoint` (C2SP tlog-checkpoint note with the witnesses' cosignatures, cached a
 *   second at most), `GET /log/vkey` (the note verifier key), `GET /log/tile/<L>/<N>[.p/<W>]` and
 *   `GET /log/tile/entries/<N>[.p/<W>]` (C2SP tlog-tiles; immutable, cached a year);
 * - `GET /log/proof/inclusion?index=&size=` (or a record's id instead of `index`, e.g.
 *   `receiptId=`) and `GET /log/proof/consistency?from=&to=`: RFC 9162 proofs as JSON, base64
 *   hashes; `size` defaults to the served checkpoint's, whose note comes with the proof;
 * - `GET /log/status`: the served checkpoint, the witnesses that cosigned it, and this service's
 *   own witness state with any split view it detected (`splitView: true`, for the console);
 * - `POST /witness/add-checkpoint` (C2SP tlog-witness): 404 unless this service witnesses other logs;
 * - `GET /witness/checkpoint?origin=`: the newest checkpoint of that log this witness cosigned, as
 *   the log signed it (a restored database of that log is caught against it at start).
 *
 * No credentials: the log is public by design (anyone may verify it).
 */
import type Router from '@koa/router';
import type { Context } from 'koa';
import { HttpError, badRequest, notFound } from '../http-error.js';
import { readsBody } from '../request-guard.js';
import { parseNote, parseTilePath, verifyCheckpoint, type TileRef } from '../../src/entries/log.js';
import { checkpointOfNote, type TransparencyLog } from './log.js';
import type { Witness } from './witness.js';

export interface LogRouteOptions {
  log: TransparencyLog;
  witness?: Witness;
  /** Query parameters that name a record instead of an index: parameter → ref prefix (`receiptId` → `receipt:`). */
  refParams?: Record<string, string>;
  /**
   * The witnesses this log asks, for /log/status: the size each cosigned last (since this process
   * started) and its last refusal or failure.
   */
  witnesses?: () => Array<{ name: string; cosignedSize: number | null; lastError: string | null; at: string | null }>;
  /** The vkeys (type 0x04) of the witnesses this log asks: /log/status lists their cosignatures that verify. */
  witnessKeys?: readonly string[];
}

const IMMUTABLE = 'public, max-age=31536000, immutable';
const MAX_WITNESS_BODY = 64 * 1024;

function sizeParam(ctx: Context, name: string): number | undefined {
  const v = ctx.query[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || !/^(0|[1-9][0-9]{0,15})$/.test(v) || !Number.isSafeInteger(Number(v)))
    throw badRequest(`${name}: expected a non-negative integer`);
  return Number(v);
}

function readText(ctx: Context, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    if (Number(ctx.get('content-length') || 0) > limit)
      return reject(new HttpError(413, 'payload_too_large', `the body is larger than ${limit} bytes`));
    const chunks: Buffer[] = [];
    let size = 0;
    ctx.req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        ctx.req.pause();
        reject(new HttpError(413, 'payload_too_large', `the body is larger than ${limit} bytes`));
      } else chunks.push(c);
    });
    ctx.req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    ctx.req.on('error', reject);
  });
}

export function logRoutes(router: Router, o: LogRouteOptions): void {
  const { log } = o;
  const served = async () => {
    const c = await log.checkpoint();
    if (!c) throw new HttpError(503, 'unavailable', 'the log has no checkpoint yet', { 'Retry-After': '1' });
    return c;
  };

  router.get('/log/checkpoint', async (ctx) => {
    const c = await served();
    ctx.set('Cache-Control', 'public, max-age=1');
    ctx.type = 'text/plain; charset=utf-8';
    ctx.body = c.note;
  });

  router.get('/log/vkey', (ctx) => {
    ctx.set('Cache-Control', 'public, max-age=3600');
    ctx.type = 'text/plain; charset=utf-8';
    ctx.body = `${log.vkey}\n`;
  });

  router.get('/log/tile/*rest', async (ctx) => {
    let t: TileRef;
    try {
      t = parseTilePath(`tile/${ctx.params['rest']}`);
    } catch {
      throw notFound('not a tile path (C2SP tlog-tiles)');
    }
    const bytes =
      t.level === 'entries' ? await log.entryBundle(t.index, t.width) : await log.tile(t.level, t.index, t.width);
    if (!bytes) throw notFound('no such tile in the log yet');
    ctx.set('Cache-Control', IMMUTABLE);
    ctx.type = 'application/octet-stream';
    ctx.body = bytes;
  });

  router.get('/log/proof/inclusion', async (ctx) => {
    let index = sizeParam(ctx, 'index');
    for (const [param, prefix] of Object.entries(o.refParams ?? {})) {
      const v = ctx.query[param];
      if (v === undefined) continue;
      if (typeof v !== 'string' || index !== undefined) throw badRequest(`${param}: give one record or one index`);
      index = (await log.indicesOf([`${prefix}${v}`])).get(`${prefix}${v}`);
      if (index === undefined)
        throw new HttpError(404, 'not_found', `no sequenced log entry for ${param} '${v}'`, { 'Retry-After': '1' });
    }
    if (index === undefined) throw badRequest(`index: required (or ${Object.keys(o.refParams ?? {}).join(', ')})`);
    const explicit = sizeParam(ctx, 'size');
    const c = explicit === undefined ? await served() : undefined;
    const size = explicit ?? c!.size;
    const tree = await log.tree();
    if (size > tree.size) throw badRequest(`size: ${size} is beyond the log's size ${tree.size}`);
    if (index >= size)
      throw new HttpError(404, 'not_found', `entry ${index} is not in the tree of size ${size} yet`, {
        'Retry-After': '1',
      });
    const p = await log.inclusion(index, size);
    const note = c?.note ?? (await log.checkpointAt(size));
    ctx.body = {
      index,
      size,
      leafHash: p.leafHash.toString('base64'),
      hashes: p.hashes.map((h) => h.toString('base64')),
      entry: p.entry,
      ...(note ? { checkpoint: note } : {}),
    };
  });

  router.get('/log/proof/consistency', async (ctx) => {
    const from = sizeParam(ctx, 'from');
    const to = sizeParam(ctx, 'to') ?? (await served()).size;
    if (from === undefined) throw badRequest('from: required');
    const tree = await log.tree();
    if (from > to) throw badRequest(`from: ${from} is larger than to ${to}`);
    if (to > tree.size) throw badRequest(`to: ${to} is beyond the log's size ${tree.size}`);
    const hashes = await log.consistency(from, to);
    ctx.body = { from, to, hashes: hashes.map((h) => h.toString('base64')) };
  });

  router.get('/log/status', async (ctx) => {
    const c = await log.checkpoint();
    const parsed = c && checkpointOfNote(c.note);
    const sigs = parsed ? parseNote(c!.note).signatures : [];
    // Each witness's cosignature that verifies, with the time it vouched for this tree.
    const verified =
      c && o.witnessKeys?.length
        ? await verifyCheckpoint(c.note, [log.vkey], { witnessKeys: [...o.witnessKeys] })
        : undefined;
    const w = o.witness ? await o.witness.status() : undefined;
    ctx.set('Cache-Control', 'no-store');
    ctx.body = {
      origin: log.origin,
      vkey: log.vkey,
      checkpoint: parsed
        ? {
            size: parsed.size,
            root: Buffer.from(parsed.rootHash).toString('base64'),
            note: c!.note,
            signedAt: new Date(c!.at).toISOString(),
            cosignedBy: [...new Set(sigs.map((s) => s.name).filter((n) => n !== log.origin))],
            cosignatures: verified?.valid
              ? verified.cosignatures.map((x) => ({ name: x.name, time: new Date(x.timestamp * 1000).toISOString() }))
              : [],
          }
        : null,
      witnesses: o.witnesses?.() ?? [],
      witness: w ?? null,
      splitView: (w?.splitViews.length ?? 0) > 0,
    };
  });

  router.get('/witness/checkpoint', async (ctx) => {
    const origin = ctx.query['origin'];
    if (typeof origin !== 'string' || origin === '' || origin.length > 1024) throw badRequest('origin: required');
    const note = o.witness ? await o.witness.latest(origin) : undefined;
    if (!note) throw notFound('this witness has cosigned no checkpoint of that log');
    ctx.set('Cache-Control', 'no-store');
    ctx.type = 'text/plain; charset=utf-8';
    ctx.body = note;
  });

  // Always answered: a service that witnesses no log knows no origin (tlog-witness: 404), said in
  // the §9 envelope as every other refusal of the service.
  router.post(
    '/witness/add-checkpoint',
    readsBody(async (ctx) => {
      if (!o.witness) throw notFound('this service witnesses no log');
      const body = await readText(ctx, MAX_WITNESS_BODY);
      const a = await o.witness.addCheckpoint(body);
      ctx.status = a.status;
      ctx.type = a.contentType;
      ctx.body = a.body;
    }),
  );
}
