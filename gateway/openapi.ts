/**
 * The payment gateway's OpenAPI 3.1 document (spec §4.1): the source of gateway/openapi.json
 * (`node scripts/gen-openapi.mjs` writes it) and what GET /openapi.json serves. A test compares
 * its paths with the routes the app registers, and the service tests validate every response
 * they receive against it.
 */
import { ERROR_CODES, WINDOW_PERIODS } from '../src/index.js';
import {
  array,
  jsonBodyOf,
  jsonResponse,
  minorUnits,
  object,
  openApiDocument,
  operation,
  pathParam,
  queryParam,
  ref,
  string,
  timestamp,
  type OpenApiDocument,
  type OpenApiOperation,
} from '../service-kit/openapi.js';
import {
  ARTIFACT_SCHEMAS,
  SERVICE_SCHEMAS,
  SHARED_TAGS,
  eventLogPaths,
  probePaths,
} from '../service-kit/openapi-schemas.js';
import { KEY_PURPOSES } from './keys/ring.js';
import { LOG_TAG, logPaths } from '../service-kit/tlog/openapi.js';
import { ASSETS as CONSOLE_ASSETS } from './routes/console.js';
import { PROXY_METHODS } from './routes/proxy.js';

const TITLE = 'CTL payment gateway';
const admin = [{ adminKey: [] }];
const owner = [{ ownerKey: [] }];
const sessionIdParam = pathParam('id', 'The session id (`sess_…`)');
/** A page of sessions (routes/sessions.ts sessionsPage). */
const PAGE_PARAMS = [
  queryParam('limit', '1–200 (default 50)', { type: 'string', pattern: '^[0-9]+$' }),
  queryParam('cursor', 'The `nextCursor` of the previous page'),
];
const cacheControl = { 'Cache-Control': { schema: string() } };

const money = object({ amount: minorUnits(), currency: string() }, ['amount', 'currency']);
const velocity = object({
  maxPaymentsPerHour: { type: 'integer', minimum: 1 },
  maxAmountPerMerchantPerDay: minorUnits(),
});
const PERIODS = [...WINDOW_PERIODS];
/** A budget window as set (PROTOCOL.md §13). */
const windowLimit = object(
  {
    every: { enum: PERIODS },
    maxAmountMinor: minorUnits(),
    maxPayments: { type: 'integer', minimum: 1 },
  },
  ['every', 'maxAmountMinor'],
);
const windowsOptions = {
  windows: array(windowLimit, {
    minItems: 1,
    maxItems: 4,
    description: 'Fixed windows (PROTOCOL.md §13), each period at most once',
  }),
  windowsStart: timestamp(),
};
const sessionOptions = {
  label: string({ maxLength: 200 }),
  merchantAllowlist: array(string(), { description: 'Host globs the agent may pay' }),
  merchantBlocklist: array(string(), { description: 'Host globs the agent may never pay' }),
  velocity,
  webhookUrl: string({ format: 'uri' }),
  thresholds: array(
    { type: 'integer', minimum: 1, maximum: 100 },
    {
      maxItems: 10,
      description: 'Percentages of the ceiling whose crossing emits session.threshold_crossed (spec §6)',
    },
  ),
  trustLevel: { enum: [0, 1] },
  defaultPurpose: string({
    description: "The purpose of a payment whose request sends no X-Ctl-Purpose (one of the session's purposes)",
  }),
};

const schemas = {
  ...ARTIFACT_SCHEMAS,
  ...SERVICE_SCHEMAS,
  Money: money,
  SessionState: { enum: ['active', 'paused', 'revoked', 'expired'] },
  SessionRequest: object(
    {
      budget: money,
      purposes: array(string(), { minItems: 1 }),
      expiresAt: timestamp(),
      softLimit: object({ amount: minorUnits() }, ['amount']),
      ...windowsOptions,
      ...sessionOptions,
    },
    ['budget', 'purposes', 'expiresAt'],
  ),
  ChildSessionRequest: object(
    {
      budget: object({ amount: minorUnits(), currency: string() }, ['amount']),
      purposes: array(string(), { minItems: 1 }),
      expiresAt: timestamp(),
      label: string({ maxLength: 200 }),
      merchantAllowlist: array(string()),
      merchantBlocklist: array(string()),
      velocity,
      ...windowsOptions,
      defaultPurpose: string({ description: "One of the child's purposes; default the parent's, while allowed" }),
    },
    ['budget'],
  ),
  SessionWindow: object(
    {
      every: { enum: PERIODS },
      maxAmountMinor: minorUnits(),
      maxPayments: { type: 'integer' },
      spentMinor: minorUnits(),
      reservedMinor: minorUnits(),
      remainingMinor: minorUnits(),
      payments: { type: 'integer' },
      startedAt: timestamp(),
      resetsAt: timestamp(),
    },
    ['every', 'maxAmountMinor', 'spentMinor', 'reservedMinor', 'remainingMinor', 'payments', 'startedAt', 'resetsAt'],
  ),
  SessionTree: object({ session: ref('Session'), children: array(ref('SessionTree')) }, ['session', 'children']),
  HumanSessionRequest: object({ humanGrant: ref('PolicyGrant'), ...sessionOptions }, ['humanGrant']),
  SessionCreated: object(
    {
      sessionToken: string({ description: "The agent's credential (`gw_sess_…`), shown once" }),
      sessionId: string(),
      revocationUrl: string({ format: 'uri' }),
      policyHash: string(),
      grantId: string(),
      expiresAt: timestamp(),
      webhookSecret: string({ description: 'Standard Webhooks secret, shown once' }),
      issuer: string(),
      parentId: string({ description: 'A child session: the session it narrows (PROTOCOL.md §14)' }),
      depth: { type: 'integer', minimum: 1 },
    },
    ['sessionToken', 'sessionId', 'revocationUrl', 'policyHash', 'grantId', 'expiresAt'],
  ),
  Session: object(
    {
      sessionId: string(),
      label: string(),
      state: ref('SessionState'),
      budget: money,
      purposes: array(string()),
      expiresAt: timestamp(),
      createdAt: timestamp(),
      spentMinor: minorUnits(),
      reservedMinor: minorUnits(),
      remainingMinor: minorUnits(),
      merchantAllowlist: array(string()),
      merchantBlocklist: array(string()),
      velocity,
      softLimit: object({ amount: minorUnits() }, ['amount']),
      webhookUrl: string(),
      thresholds: array({ type: 'integer' }),
      trustLevel: { enum: [0, 1] },
      defaultPurpose: string(),
      policyHash: string(),
      grantId: string(),
      revokedBy: { enum: ['owner', 'admin'] },
      continuationToken: string({ description: 'Only while paused (spec §5)' }),
      windows: array(ref('SessionWindow'), { description: 'Each window now (GET of one session)' }),
      windowsStart: timestamp(),
      parentId: string({ description: 'A child session: the session it narrows (PROTOCOL.md §14)' }),
      depth: { type: 'integer', minimum: 1 },
      stateFrom: string({
        description:
          'The ancestor session whose state this is: a child of a paused, revoked or expired session is so too ' +
          '(its payments meet every ancestor, PROTOCOL.md §14)',
      }),
      pausedWindow: object({ every: { enum: PERIODS }, resetsAt: timestamp() }, ['every', 'resetsAt'], {
        description: "Paused by this window's soft limit: active again at resetsAt",
      }),
    },
    [
      'sessionId',
      'label',
      'state',
      'budget',
      'purposes',
      'expiresAt',
      'createdAt',
      'spentMinor',
      'reservedMinor',
      'remainingMinor',
      'merchantAllowlist',
      'merchantBlocklist',
      'thresholds',
      'trustLevel',
      'policyHash',
      'grantId',
    ],
  ),
  SessionDispatch: object(
    {
      id: string(),
      messageId: string(),
      eventType: string(),
      status: { enum: ['pending', 'delivered', 'failed'] },
      attempts: { type: 'integer' },
      lastStatus: { type: ['integer', 'null'] },
      lastError: { type: ['string', 'null'] },
      createdAt: timestamp(),
      updatedAt: timestamp(),
    },
    ['id', 'messageId', 'eventType', 'status', 'attempts', 'lastStatus', 'lastError', 'createdAt', 'updatedAt'],
  ),
  OwnerKey: object({ keyId: string(), createdAt: timestamp(), revoked: { type: 'boolean' }, revokedAt: timestamp() }, [
    'keyId',
    'createdAt',
    'revoked',
  ]),
};

/** A static console file. */
const consoleFile = (type: string): OpenApiOperation =>
  operation({
    summary: "The budget owner's console (a static file)",
    tags: ['console'],
    security: [],
    responses: { 200: { description: 'The file', content: { [type.split(';')[0]!]: { schema: string() } } } },
  });

const merchantAnswer = {
  description:
    "The merchant's answer as it is; or, with `X-Ctl-Gateway-Error`, a refusal of the gateway's own: the §9 envelope",
  headers: {
    'X-Ctl-Gateway-Error': { schema: ref('ErrorCode'), description: "Set only on the gateway's own refusals" },
    'X-Ctl-Session-Id': { schema: string() },
    'X-Ctl-Receipt-Id': { schema: string(), description: 'After a payment' },
    'X-Ctl-Log-Index': {
      schema: string(),
      description: "After a payment: its receipt's index in the gateway's log (/log/)",
    },
  },
  content: { 'application/json': { schema: { anyOf: [ref('Error'), {}] } }, '*/*': { schema: {} } },
};

/** /proxy: the agent's request, forwarded as bytes; the answer is the merchant's (after paying its 402). */
const proxyOperation = (method: string): OpenApiOperation =>
  operation({
    summary: `Forwards a ${method} to X-Target-Url, paying a 402 within the session (spec §4.1)`,
    description:
      "The merchant's status, headers and body come back as they are; the gateway adds `X-Ctl-Session-Id` " +
      'and, after a payment, `X-Ctl-Receipt-Id`. ' +
      ("A refusal of the gateway's own carries `X-Ctl-Gateway-Error` and the §9 envelope; " +
        '`502 paid_response_lost` (with `X-Ctl-Receipt-Id`) ') +
      ("means the payment was made and the merchant's answer to the paid request was lost: " +
        'sending the request again pays again.'),
    tags: ['agent'],
    operationId: `proxy${method[0]}${method.slice(1).toLowerCase()}`,
    security: [{ sessionToken: [] }],
    parameters: [
      {
        name: 'X-Target-Url',
        in: 'header',
        required: true,
        schema: string({ format: 'uri' }),
        description: 'The merchant URL',
      },
      {
        name: 'X-Target-Method',
        in: 'header',
        schema: { enum: [...PROXY_METHODS] },
        description: "The method sent to the merchant (default: this request's)",
      },
      {
        name: 'X-Ctl-Purpose',
        in: 'header',
        schema: string(),
        description:
          "The purpose the payment is for (one of the session's purposes); default the session's defaultPurpose",
      },
      {
        name: 'Idempotency-Key',
        in: 'header',
        schema: string(),
        description: 'At most one forward and payment per (session, key)',
      },
    ],
    ...(method === 'GET' || method === 'HEAD' || method === 'DELETE'
      ? {}
      : { requestBody: { required: false, content: { '*/*': { schema: {} } } } }),
    // Any status may be the merchant's own (its 4xx and 5xx too): only X-Ctl-Gateway-Error tells the gateway's refusals
    // apart.
    responses: Object.fromEntries(['default', '4XX', '5XX'].map((k) => [k, merchantAnswer])),
  });

/** Each listed receipt's index in the gateway's transparency log, by receipt id (those sequenced so far). */
const RECEIPT_LOG_INDEX = {
  type: 'object',
  additionalProperties: { type: 'integer', minimum: 0 },
  description: "Each receipt's index in the gateway's transparency log (/log/), by receipt id",
};

const paths: OpenApiDocument['paths'] = {
  ...probePaths(TITLE),
  '/admin/owners': {
    post: operation({
      summary: 'Creates a budget owner and its first API key (shown once)',
      tags: ['admin'],
      operationId: 'createOwner',
      security: admin,
      requestBody: jsonBodyOf(object({ label: string({ maxLength: 200 }) })),
      responses: {
        201: jsonResponse(
          'The owner',
          object({ ownerId: string(), keyId: string(), apiKey: string(), label: string() }, [
            'ownerId',
            'keyId',
            'apiKey',
          ]),
        ),
      },
    }),
  },
  '/admin/owners/{ownerId}': {
    get: operation({
      summary: 'An owner and its keys (ids and dates only)',
      tags: ['admin'],
      operationId: 'getOwner',
      security: admin,
      parameters: [pathParam('ownerId', 'The owner id')],
      responses: {
        200: jsonResponse(
          'The owner',
          object(
            {
              ownerId: string(),
              label: string(),
              createdAt: timestamp(),
              disabled: { type: 'boolean' },
              disabledAt: timestamp(),
              keys: array(ref('OwnerKey')),
            },
            ['ownerId', 'createdAt', 'disabled', 'keys'],
          ),
        ),
      },
    }),
    delete: operation({
      summary: 'Disables an owner: its keys and live sessions stop at once',
      tags: ['admin'],
      operationId: 'disableOwner',
      security: admin,
      parameters: [pathParam('ownerId', 'The owner id')],
      responses: {
        200: jsonResponse(
          'Disabled',
          object(
            {
              ownerId: string(),
              disabled: { const: true },
              revoked: { const: true },
              revokedSessions: { type: 'integer' },
            },
            ['ownerId', 'disabled', 'revoked', 'revokedSessions'],
          ),
        ),
      },
    }),
  },
  '/admin/owners/{ownerId}/sessions': {
    get: operation({
      summary: "An owner's sessions, newest first (for the admin's stop button)",
      tags: ['admin'],
      operationId: 'listOwnerSessions',
      security: admin,
      parameters: [pathParam('ownerId', 'The owner id'), ...PAGE_PARAMS],
      responses: {
        200: jsonResponse(
          'A page',
          object({ ownerId: string(), sessions: array(ref('Session')), nextCursor: string() }, ['ownerId', 'sessions']),
        ),
      },
    }),
  },
  '/admin/owners/{ownerId}/keys': {
    post: operation({
      summary: 'Adds an API key to an owner (shown once)',
      tags: ['admin'],
      operationId: 'addOwnerKey',
      security: admin,
      parameters: [pathParam('ownerId', 'The owner id')],
      responses: {
        201: jsonResponse(
          'The key',
          object({ ownerId: string(), keyId: string(), apiKey: string() }, ['ownerId', 'keyId', 'apiKey']),
        ),
      },
    }),
  },
  '/admin/owners/{ownerId}/keys/{keyId}': {
    delete: operation({
      summary: "Revokes an owner's API key",
      tags: ['admin'],
      operationId: 'revokeOwnerKey',
      security: admin,
      parameters: [pathParam('ownerId', 'The owner id'), pathParam('keyId', 'The key id')],
      responses: {
        200: jsonResponse(
          'Revoked',
          object({ ownerId: string(), keyId: string(), revoked: { const: true } }, ['ownerId', 'keyId', 'revoked']),
        ),
      },
    }),
  },
  '/admin/sessions/{id}': {
    delete: operation({
      summary: "Revokes any session (the admin's stop button)",
      tags: ['admin'],
      operationId: 'adminRevokeSession',
      security: admin,
      parameters: [sessionIdParam],
      responses: { 200: jsonResponse('The session, revoked', ref('Session')) },
    }),
  },
  '/admin/egress/ca/rotate': {
    post: operation({
      summary: "Replaces the egress proxy's CA: every agent must install the new certificate",
      tags: ['admin'],
      operationId: 'rotateEgressCa',
      security: admin,
      responses: {
        200: jsonResponse("The new CA's SHA-256 fingerprint", object({ fingerprint: string() }, ['fingerprint'])),
      },
    }),
  },
  '/ca.pem': {
    get: operation({
      summary: 'The egress proxy\'s CA certificate, for agents to trust (gateway/README.md "Egress proxy")',
      tags: ['keys'],
      operationId: 'getEgressCa',
      security: owner,
      responses: {
        200: {
          description: 'The certificate (PEM)',
          headers: { 'X-Ctl-Ca-Fingerprint': { schema: string() } },
          content: { 'application/x-pem-file': { schema: string() } },
        },
      },
    }),
  },
  '/admin/keys/rotate': {
    post: operation({
      summary: 'Rotates a signing key',
      tags: ['admin'],
      operationId: 'rotateKey',
      security: admin,
      requestBody: jsonBodyOf(object({ purpose: { enum: [...KEY_PURPOSES] } }, ['purpose'])),
      responses: {
        200: jsonResponse(
          'The new key id',
          object({ purpose: { enum: [...KEY_PURPOSES] }, kid: string() }, ['purpose', 'kid']),
        ),
      },
    }),
  },
  ...eventLogPaths(admin),
  ...logPaths({ receiptId: "a receipt's id" }),
  '/sessions': {
    post: operation({
      summary: 'Opens a session: a budget, purposes and an expiry for one agent (spec §4.1)',
      description: "With `humanGrant`: a session under a person's signed grant (PROTOCOL.md §10).",
      tags: ['sessions'],
      operationId: 'createSession',
      security: owner,
      requestBody: jsonBodyOf({ oneOf: [ref('SessionRequest'), ref('HumanSessionRequest')] }),
      responses: {
        201: jsonResponse('The session and its token (shown once)', ref('SessionCreated')),
        403: jsonResponse(
          '`issuer_not_trusted`: the `humanGrant` is not recorded at an authority this gateway trusts',
          ref('Error'),
        ),
      },
    }),
    get: operation({
      summary: "The owner's sessions, newest first",
      tags: ['sessions'],
      operationId: 'listSessions',
      security: owner,
      parameters: PAGE_PARAMS,
      responses: {
        200: jsonResponse('A page', object({ sessions: array(ref('Session')), nextCursor: string() }, ['sessions'])),
      },
    }),
  },
  '/sessions/human/keys': {
    post: operation({
      summary: 'A session key for a person to delegate to (PROTOCOL.md §10)',
      tags: ['sessions'],
      operationId: 'prepareHumanSessionKey',
      security: owner,
      responses: {
        201: jsonResponse(
          'The public half',
          object({ actorKey: ref('PublicJwk'), actorDid: string(), keyId: string(), expiresAt: timestamp() }, [
            'actorKey',
            'actorDid',
            'keyId',
            'expiresAt',
          ]),
        ),
      },
    }),
  },
  '/sessions/{id}': {
    get: operation({
      summary: 'A session',
      tags: ['sessions'],
      operationId: 'getSession',
      security: owner,
      parameters: [sessionIdParam],
      responses: { 200: jsonResponse('The session', ref('Session')) },
    }),
    delete: operation({
      summary: 'Revokes a session at once (spec §3)',
      tags: ['sessions'],
      operationId: 'revokeSession',
      security: owner,
      parameters: [sessionIdParam],
      responses: { 200: jsonResponse('The session, revoked', ref('Session')) },
    }),
    patch: operation({
      summary: 'Continues a paused session with its continuation token (spec §5)',
      description: "The owner, or the agent with this session's token.",
      tags: ['sessions'],
      operationId: 'continueSession',
      security: [{ ownerKey: [] }, { sessionToken: [] }],
      parameters: [sessionIdParam],
      requestBody: jsonBodyOf(
        object(
          { continuationToken: string(), amount: minorUnits('At most softLimit.amount (default: softLimit.amount)') },
          ['continuationToken'],
        ),
      ),
      responses: { 200: jsonResponse('The session, active again', ref('Session')) },
    }),
  },
  '/sessions/{id}/receipts': {
    get: operation({
      summary: "The receipts of a session's payments",
      tags: ['sessions'],
      operationId: 'listReceipts',
      security: owner,
      parameters: [
        sessionIdParam,
        queryParam(
          'descendants',
          'true: also the receipts of every session below it, which its spend counts (each names its session)',
          { enum: ['true', 'false'] },
        ),
      ],
      responses: {
        200: jsonResponse(
          'The receipts, oldest first',
          object({ sessionId: string(), receipts: array(ref('Receipt')), logIndex: RECEIPT_LOG_INDEX }, [
            'sessionId',
            'receipts',
          ]),
        ),
      },
    }),
  },
  '/sessions/{id}/children': {
    post: operation({
      summary: 'Creates a child session that narrows this one (PROTOCOL.md §14), for a sub-agent',
      description:
        "Authorised by this session's token. Every field narrows the parent's (absent: the parent's); a widening " +
        'field is 400 `delegation_invalid` naming it. Each payment of the child reserves on it and every ancestor.',
      tags: ['agent'],
      operationId: 'createChildSession',
      security: [{ sessionToken: [] }],
      parameters: [sessionIdParam],
      requestBody: jsonBodyOf(ref('ChildSessionRequest')),
      responses: { 201: jsonResponse('The child session and its token (shown once)', ref('SessionCreated')) },
    }),
  },
  '/sessions/{id}/tree': {
    get: operation({
      summary: 'A session and every session below it, with what each spent',
      tags: ['sessions'],
      operationId: 'getSessionTree',
      security: owner,
      parameters: [sessionIdParam],
      responses: { 200: jsonResponse('The tree', ref('SessionTree')) },
    }),
  },
  '/sessions/{id}/webhooks': {
    get: operation({
      summary: 'The webhook deliveries of a session',
      tags: ['sessions'],
      operationId: 'listSessionWebhooks',
      security: owner,
      parameters: [sessionIdParam, queryParam('limit', '1–500 (default 100)', { type: 'string', pattern: '^[0-9]+$' })],
      responses: {
        200: jsonResponse(
          'The deliveries',
          object({ sessionId: string(), webhookUrl: string(), dispatches: array(ref('SessionDispatch')) }, [
            'sessionId',
            'dispatches',
          ]),
        ),
      },
    }),
  },
  // Agent side, read only: the token's own session (no continuation token, no webhook address).
  '/session': {
    get: operation({
      summary: "The agent's own session, by its token",
      description:
        "The owner's view without `continuationToken` and `webhookUrl`: the agent sees it " +
        'is paused, never the token that continues it.',
      tags: ['agent'],
      operationId: 'getOwnSession',
      security: [{ sessionToken: [] }],
      responses: { 200: jsonResponse('The session', ref('Session')) },
    }),
  },
  '/session/receipts': {
    get: operation({
      summary: "The receipts of the token's session",
      tags: ['agent'],
      operationId: 'listOwnReceipts',
      security: [{ sessionToken: [] }],
      responses: {
        200: jsonResponse(
          'The receipts, oldest first',
          object({ sessionId: string(), receipts: array(ref('Receipt')), logIndex: RECEIPT_LOG_INDEX }, [
            'sessionId',
            'receipts',
          ]),
        ),
      },
    }),
  },
  '/session/receipts/{receiptId}': {
    get: operation({
      summary: "One receipt of the token's session (another session's is 404)",
      tags: ['agent'],
      operationId: 'getOwnReceipt',
      security: [{ sessionToken: [] }],
      parameters: [pathParam('receiptId', 'The receipt id (`rcpt_…`)')],
      responses: { 200: jsonResponse('The signed receipt', ref('Receipt')) },
    }),
  },
  // Every method the proxy forwards (X-Target-Method's list); the router takes any and refuses the rest.
  '/proxy': Object.fromEntries(PROXY_METHODS.map((m) => [m.toLowerCase(), proxyOperation(m)])),
  '/charge': {
    post: operation({
      summary: 'Payment terms for a merchant on the ledger rail',
      tags: ['merchant'],
      operationId: 'createCharge',
      security: [],
      requestBody: jsonBodyOf(
        object({ amount: minorUnits(), currency: string(), description: string({ maxLength: 500 }) }, [
          'amount',
          'currency',
        ]),
      ),
      responses: {
        201: jsonResponse(
          "The charge; put `xPayment` in the 402's X-Payment",
          object(
            {
              chargeId: string(),
              paymentTerms: object({ amount: minorUnits(), currency: string(), address: string() }, [
                'amount',
                'currency',
                'address',
              ]),
              xPayment: string(),
              verifyUrl: string({ format: 'uri' }),
            },
            ['chargeId', 'paymentTerms', 'xPayment', 'verifyUrl'],
          ),
        ),
      },
    }),
  },
  '/charge/{id}/verify': {
    get: operation({
      summary: 'Whether a charge (or a `txid:` reference) was paid',
      tags: ['merchant'],
      operationId: 'verifyCharge',
      security: [],
      parameters: [pathParam('id', 'A charge id or `txid:<ref>`')],
      responses: {
        200: jsonResponse('The payment state', {
          oneOf: [
            object(
              {
                chargeId: string(),
                amountMinor: minorUnits(),
                currency: string(),
                paid: { type: 'boolean' },
                txRef: string(),
                paidAt: timestamp(),
                payments: { type: 'integer' },
              },
              ['chargeId', 'amountMinor', 'currency', 'paid', 'payments'],
            ),
            object(
              {
                paid: { const: true },
                txRef: string(),
                amountMinor: minorUnits(),
                currency: string(),
                address: string(),
                paidAt: timestamp(),
              },
              ['paid', 'txRef', 'amountMinor', 'currency', 'address', 'paidAt'],
            ),
          ],
        }),
      },
    }),
  },
  '/.well-known/x402-payment-info': {
    get: operation({
      summary: 'How a merchant takes payments through this gateway',
      tags: ['merchant'],
      operationId: 'paymentInfo',
      security: [],
      responses: {
        200: jsonResponse(
          'Where things are',
          object(
            {
              rails: array(string()),
              paymentTermsHeader: string(),
              receiptHeader: string(),
              sbaHeader: string(),
              chargeUrl: string(),
              verifyUrl: string(),
              keysUrl: string(),
              trustBundleUrl: string(),
            },
            [
              'rails',
              'paymentTermsHeader',
              'receiptHeader',
              'sbaHeader',
              'chargeUrl',
              'verifyUrl',
              'keysUrl',
              'trustBundleUrl',
            ],
          ),
        ),
      },
    }),
  },
  '/.well-known/ctl-keys.json': {
    get: operation({
      summary: 'The grant and receipt keys (JWKS), active and retired',
      tags: ['keys'],
      operationId: 'getJwks',
      security: [],
      responses: { 200: jsonResponse('The JWKS', ref('Jwks'), cacheControl) },
    }),
  },
  '/.well-known/ctl-trust-bundle.json': {
    get: operation({
      summary: 'The Trust Bundle signed by the bundle root, at the current sequence',
      tags: ['keys'],
      operationId: 'getTrustBundle',
      security: [],
      responses: { 200: jsonResponse('The bundle', ref('TrustBundle'), cacheControl) },
    }),
  },
  '/.well-known/ctl-bundle-root.json': {
    get: operation({
      summary: 'The bundle root key a device pins',
      tags: ['keys'],
      operationId: 'getBundleRoot',
      security: [],
      responses: { 200: jsonResponse('The root key', ref('Jwks')) },
    }),
  },
  '/revoke': {
    get: operation({
      summary: "Revocation status of a session's grant (PROTOCOL.md §5 step 3)",
      tags: ['keys'],
      operationId: 'revocationStatus',
      security: [],
      parameters: [queryParam('grantId', 'The grant id', { type: 'string' }, true)],
      responses: { 200: jsonResponse('The status', ref('RevocationStatus')) },
    }),
  },
  ...Object.fromEntries(Object.entries(CONSOLE_ASSETS).map(([path, [, type]]) => [path, { get: consoleFile(type) }])),
  '/console/events': {
    get: operation({
      summary: "The owner's live feed of session events (Server-Sent Events)",
      tags: ['console'],
      operationId: 'consoleEvents',
      security: owner,
      responses: { 200: { description: 'An event stream', content: { 'text/event-stream': { schema: string() } } } },
    }),
  },
};

export const GATEWAY_OPENAPI: OpenApiDocument = openApiDocument({
  title: TITLE,
  version: '1.0.0',
  description:
    "Sessions with a budget for AI agents, and the proxy that pays merchants' 402s within " +
    'them (spec §1 part 1, §4.1). Refusals are `{ error: { code, message } }` with a PROTOCOL.md §9 code.',
  errorCodes: ERROR_CODES,
  paths,
  schemas,
  securitySchemes: {
    adminKey: { type: 'http', scheme: 'bearer', description: 'CTL_GATEWAY_ADMIN_KEY' },
    ownerKey: { type: 'http', scheme: 'bearer', description: "A budget owner's API key (POST /admin/owners)" },
    sessionToken: { type: 'http', scheme: 'bearer', description: 'A session token (`gw_sess_…`, POST /sessions)' },
  },
  tags: [
    ...SHARED_TAGS,
    LOG_TAG,
    { name: 'admin', description: 'Budget owners, keys, any session' },
    { name: 'sessions', description: "The budget owner's sessions" },
    { name: 'agent', description: 'What the agent calls with its session token' },
    { name: 'merchant', description: 'Merchant mode on the ledger rail' },
    { name: 'keys', description: 'What verifiers fetch' },
    { name: 'console', description: "The owner's web console" },
  ],
});
