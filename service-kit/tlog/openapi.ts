/** The log's routes (routes.ts) in an OpenAPI document: `...logPaths({ receiptId: 'a receipt id' })`. */
import {
  array,
  jsonResponse,
  object,
  operation,
  queryParam,
  string,
  type OpenApiDocument,
  type OpenApiResponse,
  type Schema,
} from '../openapi.js';

const bytes = (description: string): OpenApiResponse => ({
  description,
  content: { 'application/octet-stream': { schema: string({ format: 'binary' }) } },
});
const text = (description: string): OpenApiResponse => ({
  description,
  content: { 'text/plain': { schema: string() } },
});
const size = { type: 'integer', minimum: 0 } as Schema;
const hashes = array(string({ contentEncoding: 'base64' }));

/** The paths of logRoutes; `refParams`: the record ids a proof may be asked by. */
export function logPaths(refParams: Record<string, string>): OpenApiDocument['paths'] {
  const tags = ['log'];
  const paths: OpenApiDocument['paths'] = {
    '/log/checkpoint': {
      get: operation({
        summary: 'The signed checkpoint (C2SP tlog-checkpoint note, with witness cosignatures)',
        tags,
        operationId: 'getLogCheckpoint',
        security: [],
        responses: { 200: text('The note') },
      }),
    },
    '/log/vkey': {
      get: operation({
        summary: "The log's note verifier key (C2SP signed-note vkey)",
        tags,
        operationId: 'getLogVkey',
        security: [],
        responses: { 200: text('The vkey') },
      }),
    },
    '/log/tile/{rest}': {
      get: operation({
        summary: 'A tile `<L>/<N>[.p/<W>]` or entry bundle `entries/<N>[.p/<W>]` (C2SP tlog-tiles), immutable',
        tags,
        operationId: 'getLogTile',
        security: [],
        parameters: [
          {
            name: 'rest',
            in: 'path',
            required: true,
            description: '`<L>/<N>[.p/<W>]` or `entries/<N>[.p/<W>]` (slashes included)',
            schema: string(),
          },
        ],
        responses: { 200: bytes('Tile hashes (32 bytes each) or uint16-length-prefixed entries') },
      }),
    },
    '/log/proof/inclusion': {
      get: operation({
        summary: 'RFC 9162 inclusion proof of one entry, by index or by record id',
        tags,
        operationId: 'getLogInclusionProof',
        security: [],
        parameters: [
          queryParam('index', 'The entry index', size),
          ...Object.entries(refParams).map(([name, what]) => queryParam(name, `Instead of index: ${what}`, string())),
          queryParam('size', "Tree size (default: the served checkpoint's)", size),
        ],
        responses: {
          200: jsonResponse(
            'The proof',
            object({ index: size, size, leafHash: string(), hashes, entry: string(), checkpoint: string() }, [
              'index',
              'size',
              'leafHash',
              'hashes',
              'entry',
            ]),
          ),
        },
      }),
    },
    '/log/proof/consistency': {
      get: operation({
        summary: 'RFC 9162 consistency proof between two tree sizes',
        tags,
        operationId: 'getLogConsistencyProof',
        security: [],
        parameters: [
          queryParam('from', 'The older size', size, true),
          queryParam('to', "The newer size (default: the served checkpoint's)", size),
        ],
        responses: {
          200: jsonResponse('The proof', object({ from: size, to: size, hashes }, ['from', 'to', 'hashes'])),
        },
      }),
    },
    '/log/status': {
      get: operation({
        summary: 'The served checkpoint, its witnesses, and what this service witnesses (split views)',
        tags,
        operationId: 'getLogStatus',
        security: [],
        responses: {
          200: jsonResponse(
            'The status',
            object(
              {
                origin: string(),
                vkey: string(),
                checkpoint: { type: ['object', 'null'] },
                witnesses: array(
                  object(
                    {
                      name: string(),
                      cosignedSize: { type: ['integer', 'null'] },
                      lastError: { type: ['string', 'null'] },
                      at: { type: ['string', 'null'] },
                    },
                    ['name', 'cosignedSize', 'lastError', 'at'],
                  ),
                ),
                witness: { type: ['object', 'null'] },
                splitView: { type: 'boolean' },
              },
              ['origin', 'vkey', 'checkpoint', 'witnesses', 'witness', 'splitView'],
            ),
          ),
        },
      }),
    },
  };
  paths['/witness/checkpoint'] = {
    get: operation({
      summary: 'The newest checkpoint of a log this service cosigned, as the log signed it',
      tags,
      operationId: 'getWitnessedCheckpoint',
      security: [],
      parameters: [queryParam('origin', "The log's origin (its key's name)", string(), true)],
      responses: { 200: text('The checkpoint note') },
    }),
  };
  paths['/witness/add-checkpoint'] = {
    post: operation({
      summary: 'C2SP tlog-witness add-checkpoint: cosigns a consistent checkpoint of a log this service witnesses',
      tags,
      operationId: 'addCheckpoint',
      security: [],
      requestBody: { required: true, content: { 'text/plain': { schema: string() } } },
      responses: { 200: text('Cosignature lines'), 409: text('The size last cosigned (text/x.tlog.size)') },
    }),
  };
  return paths;
}

export const LOG_TAG = { name: 'log', description: 'The transparency log (C2SP tlog-tiles) and its witness' };
