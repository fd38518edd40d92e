/**
 * A log's public bytes for the audit tests: a snapshot of what a service serves under /log/ (from
 * a TransparencyLog of service-kit, so a test can forge a log with a real key), a fetch that
 * serves a snapshot (edited or not) without a network, and an HTTP handler serving a log live.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TransparencyLog } from '../../service-kit/tlog/index.js';
import { parseCheckpoint, parseNote, tilePath, tilesOfTree, type TileRef } from '../../src/entries/log.js';

async function tileBytes(log: TransparencyLog, t: TileRef): Promise<Uint8Array | undefined> {
  const b = t.level === 'entries' ? await log.entryBundle(t.index, t.width) : await log.tile(t.level, t.index, t.width);
  return b && new Uint8Array(b);
}

/** Every path a full audit reads, with its bytes. */
export async function snapshotLog(log: TransparencyLog, vkey: string, jwks: unknown): Promise<Map<string, Uint8Array>> {
  const enc = new TextEncoder();
  const cp = (await log.checkpoint())!;
  const out = new Map<string, Uint8Array>([
    ['/log/vkey', enc.encode(`${vkey}\n`)],
    ['/log/checkpoint', enc.encode(cp.note)],
    ['/.well-known/ctl-keys.json', enc.encode(JSON.stringify(jwks))],
  ]);
  for (const t of tilesOfTree(cp.size)) out.set(`/log/${tilePath(t)}`, (await tileBytes(log, t))!);
  return out;
}

/** A fetch answering from `served` by path (404 for anything else). */
export function createTamperedFetch(served: ReadonlyMap<string, Uint8Array>): typeof fetch {
  return (async (input: string | URL) => {
    const path = new URL(String(input)).pathname;
    const b = served.get(path);
    return b ? new Response(b as Uint8Array<ArrayBuffer>) : new Response('not found', { status: 404 });
  }) as typeof fetch;
}

/** The /log/ routes a monitor reads (checkpoint, vkey, tiles, consistency proofs), served from `log`. */
export function serveLog(log: TransparencyLog) {
  return (req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      const url = new URL(req.url!, 'http://x');
      const cp = (await log.checkpoint())!;
      if (url.pathname === '/log/checkpoint') return res.end(cp.note);
      if (url.pathname === '/log/proof/consistency') {
        const hashes = await log.consistency(Number(url.searchParams.get('from')), Number(url.searchParams.get('to')));
        return res.end(JSON.stringify({ hashes: hashes.map((h) => h.toString('base64')) }));
      }
      const size = parseCheckpoint(parseNote(cp.note).text).size;
      const t = tilesOfTree(size).find((x) => `/log/${tilePath(x)}` === url.pathname);
      const b = t && (await tileBytes(log, t));
      res.statusCode = b ? 200 : 404;
      res.end(b ?? 'not found');
    })();
  };
}
