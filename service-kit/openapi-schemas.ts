/**
 * JSON Schemas of what both services send: the PROTOCOL.md §4 artifacts (grant, bundle,
 * receipt, root statement, JWKS) and the shared service shapes (readiness, audit log, webhook
 * dispatch log). Component names are the keys; each document includes the ones it uses.
 */
import {
  array,
  jsonResponse,
  minorUnits,
  object,
  OPENAPI_PATH,
  openApiPathItem,
  operation,
  pathParam,
  queryParam,
  ref,
  string,
  timestamp,
  type OpenApiDocument,
  type OpenApiResponse,
  type Schema,
} from './openapi.js';
import { AUDIT_PATH } from './event-admin.js';
import { WINDOW_PERIODS } from '../src/index.js';

const asset = object({ standard: string(), code: string() }, ['standard', 'code']);
const velocity = object({ maxPaymentsPerHour: { type: 'integer' }, maxAmountPerMerchantPerDay: minorUnits() });
const offline = object({
  maxAmountMinor: minorUnits(),
  maxPayments: { type: 'integer' },
  maxBundleAgeMs: { type: 'integer' },
});
/** PROTOCOL.md §14: how many signed delegations may hang below a grant. */
const delegation = object({ maxDepth: { type: 'integer', minimum: 1, maximum: 4 } }, ['maxDepth']);
/** PROTOCOL.md §13: 1–4 fixed windows, each period at most once. */
const windows = array(
  object(
    {
      every: { enum: [...WINDOW_PERIODS] },
      maxAmountMinor: minorUnits(),
      maxPayments: { type: 'integer' },
    },
    ['every', 'maxAmountMinor'],
  ),
);
const scope = object({ category: string(), merchant: string(), region: string() });

const GRANT_MEMBERS: Record<string, Schema> = {
  version: { const: 1 },
  grantId: string(),
  policyHash: string(),
  issuer: string(),
  keyId: string(),
  issuedAt: timestamp(),
  expiresAt: timestamp(),
  allowedRails: array(string()),
  allowedAssets: array(ref('Asset')),
  allowedPurposes: array(string()),
  maxAmountMinor: minorUnits(),
  currency: string(),
  destinationAllowlist: array(string()),
  revocationUrl: string({ format: 'uri' }),
  actorKey: ref('PublicJwk'),
  velocity,
  offline,
  windows,
  windowsStart: timestamp(),
  profile: { const: 'human-agent' },
  delegation,
};
const GRANT_REQUIRED = [
  'version',
  'grantId',
  'policyHash',
  'issuer',
  'keyId',
  'issuedAt',
  'expiresAt',
  'allowedRails',
  'allowedAssets',
  'maxAmountMinor',
  'currency',
  'revocationUrl',
  'actorKey',
];

/** PROTOCOL.md §4 artifacts and keys. */
export const ARTIFACT_SCHEMAS: Record<string, Schema> = {
  PublicJwk: {
    type: 'object',
    description: 'A public JWK (Ed25519 `OKP` or P-256 `EC`).',
    required: ['kty'],
    properties: { kty: { enum: ['OKP', 'EC'] }, crv: string(), x: string(), y: string() },
  },
  PublishedJwk: {
    type: 'object',
    description: 'A JWKS entry: the public JWK with `kid`, `alg` and the purposes it signs for.',
    required: ['kty', 'kid', 'alg'],
    properties: {
      kty: { enum: ['OKP', 'EC'] },
      kid: string(),
      alg: { enum: ['EdDSA', 'ES256'] },
      purposes: array(string()),
      status: string(),
    },
  },
  Jwks: object({ keys: array(ref('PublishedJwk')) }, ['keys']),
  Asset: asset,
  BundleScope: scope,
  PolicyGrantFields: object(
    {
      policyHash: { type: 'string', pattern: '^[0-9a-f]{64}$' },
      actorKey: { description: "The actor's public key: a JWK, or a PEM string." },
      allowedRails: array(string()),
      allowedAssets: array(ref('Asset')),
      maxAmountMinor: minorUnits(),
      currency: string(),
      expiresAt: timestamp(),
      destinationAllowlist: array(string()),
      allowedPurposes: array(string()),
      velocity,
      offline,
      windows,
      windowsStart: timestamp(),
      delegation,
    },
    ['policyHash', 'actorKey', 'allowedRails', 'allowedAssets', 'maxAmountMinor', 'currency', 'expiresAt'],
  ),
  PolicyGrant: object({ ...GRANT_MEMBERS, signature: string() }, [...GRANT_REQUIRED, 'signature']),
  UnsignedGrant: object(GRANT_MEMBERS, GRANT_REQUIRED, {
    description: 'A PolicyGrant before its signature (PROTOCOL.md §10: what a person signs).',
  }),
  TrustBundle: object(
    {
      version: { const: 1 },
      bundleId: string(),
      sequence: { type: 'integer' },
      issuer: string(),
      keyId: string(),
      issuedAt: timestamp(),
      expiresAt: timestamp(),
      scope,
      issuers: array(object({ issuer: string(), keys: array(ref('PublishedJwk')) }, ['issuer', 'keys'])),
      revokedGrants: array(string()),
      signature: string(),
    },
    [
      'version',
      'bundleId',
      'sequence',
      'issuer',
      'keyId',
      'issuedAt',
      'expiresAt',
      'scope',
      'issuers',
      'revokedGrants',
      'signature',
    ],
  ),
  Receipt: object(
    {
      version: { const: 1 },
      receiptId: string(),
      sessionId: string(),
      grantId: string(),
      purpose: string(),
      amount: object({ amountMinor: minorUnits(), currency: string() }, ['amountMinor', 'currency']),
      authorizedAmountMinor: minorUnits(
        'A hold (PROTOCOL.md §15): the amount authorized; `amount` is what was captured.',
      ),
      merchant: string(),
      paidAt: timestamp(),
      txRef: string(),
      rail: string(),
      sba: {
        type: 'object',
        description: 'The Signed Budget Authorization the payment was made under (PROTOCOL.md §4).',
      },
      keyId: string(),
      signature: string(),
    },
    [
      'version',
      'receiptId',
      'sessionId',
      'grantId',
      'purpose',
      'amount',
      'merchant',
      'paidAt',
      'txRef',
      'rail',
      'keyId',
      'signature',
    ],
  ),
  RootStatement: object(
    {
      version: { const: 1 },
      rootVersion: { type: 'integer', minimum: 1 },
      keys: array(ref('PublishedJwk')),
      threshold: { type: 'integer', minimum: 1 },
      bundleKeys: array(ref('PublishedJwk')),
      issuedAt: timestamp(),
      signatures: array(object({ keyId: string(), signature: string() }, ['keyId', 'signature'])),
    },
    ['version', 'rootVersion', 'keys', 'threshold', 'bundleKeys', 'issuedAt', 'signatures'],
  ),
  RevocationStatus: object({ grantId: string(), revoked: { type: 'boolean' }, revokedAt: timestamp() }, [
    'grantId',
    'revoked',
  ]),
};

/** The service shapes both services answer with (service-kit readiness, audit log, outbox). */
export const SERVICE_SCHEMAS: Record<string, Schema> = {
  Health: object({ ok: { const: true } }, ['ok']),
  Readiness: object(
    {
      status: { enum: ['ok', 'unavailable'] },
      checks: { type: 'object', additionalProperties: { enum: ['ok', 'failed'] } },
    },
    ['status', 'checks'],
  ),
  AuditEntry: object(
    {
      seq: { type: 'integer' },
      at: timestamp(),
      actor: string(),
      action: string(),
      subject: string(),
      data: { description: 'The details, as hashed.' },
      prevHash: string(),
      hash: string(),
    },
    ['seq', 'at', 'actor', 'action', 'subject', 'data', 'prevHash', 'hash'],
  ),
  AuditPage: object(
    {
      entries: array(ref('AuditEntry')),
      next: { type: ['integer', 'null'], description: 'The `afterSeq` of the next page; null when empty.' },
    },
    ['entries', 'next'],
  ),
  AuditVerification: {
    oneOf: [
      object({ ok: { const: true }, count: { type: 'integer' }, headHash: string() }, ['ok', 'count', 'headHash']),
      object({ ok: { const: false }, badSeq: { type: 'integer' }, reason: string() }, ['ok', 'badSeq', 'reason']),
    ],
  },
  WebhookDispatch: object(
    {
      id: string(),
      messageId: string(),
      endpoint: string(),
      eventType: string(),
      body: string({ description: 'The payload as sent.' }),
      status: { enum: ['pending', 'delivered', 'failed'] },
      attempts: { type: 'integer' },
      lastStatus: { type: ['integer', 'null'] },
      lastError: { type: ['string', 'null'] },
      createdAt: timestamp(),
      updatedAt: timestamp(),
      nextAttemptAt: { type: ['string', 'null'], format: 'date-time' },
    },
    ['id', 'messageId', 'endpoint', 'eventType', 'body', 'status', 'attempts', 'createdAt', 'updatedAt'],
  ),
  WebhookDispatches: object({ dispatches: array(ref('WebhookDispatch')) }, ['dispatches']),
  AnchorHead: object(
    {
      origin: string({ description: 'The log, e.g. `authority.example.com/ctl-authority-log`.' }),
      size: { type: 'integer', description: 'Entries (the audit hash chain: the last `seq`).' },
      root: string({ description: 'The root hash, 64 hex (the audit hash chain: the head entry hash).' }),
    },
    ['origin', 'size', 'root'],
  ),
  ChainJob: object(
    {
      id: string(),
      chain: string({ description: '`evm`, `btc` or `file`.' }),
      kind: { enum: ['anchor', 'revocation'] },
      subject: string({ description: 'The origin anchored, or the revocation token id.' }),
      job: {
        description:
          "`{ kind: anchor, head, source, checkpoint? }` (`source`: `checkpoint`, the log's signed checkpoint " +
          "whose note is `checkpoint`, or `audit-head`, the audit chain's head when the log is off) or " +
          '`{ kind: revocation, id, expiresAt }`.',
      },
      status: { enum: ['pending', 'sent', 'confirmed', 'superseded'] },
      attempts: { type: 'integer' },
      lastError: { type: ['string', 'null'] },
      txid: { type: ['string', 'null'] },
      blockNumber: { type: ['integer', 'null'] },
      blockHash: { type: ['string', 'null'] },
      confirmations: { type: 'integer' },
      createdAt: timestamp(),
      since: timestamp(),
      sentAt: { type: ['string', 'null'], format: 'date-time' },
      confirmedAt: { type: ['string', 'null'], format: 'date-time' },
      alerted: { type: 'boolean' },
    },
    ['id', 'chain', 'kind', 'subject', 'job', 'status', 'attempts', 'txid', 'confirmations', 'createdAt', 'since'],
  ),
  Anchors: object(
    {
      logs: array(
        object(
          {
            origin: string(),
            source: {
              enum: ['checkpoint', 'audit-head'],
              description: "What is anchored: the log's signed checkpoint, or the audit chain's head (log off).",
            },
            head: { oneOf: [ref('AnchorHead'), { type: 'null' }] },
            checkpoint: string({ description: 'The signed checkpoint note the head was read from.' }),
          },
          ['origin', 'source', 'head'],
        ),
      ),
      jobs: array(ref('ChainJob')),
    },
    ['logs', 'jobs'],
  ),
  Redelivery: object({ id: string(), status: { const: 'pending' } }, ['id', 'status']),
};

const text = (description: string): OpenApiResponse => ({
  description,
  content: { 'text/plain': { schema: string() } },
});

/** GET /healthz, /readyz, /metrics and /openapi.json: the same on both services, no credentials. */
export function probePaths(title: string): OpenApiDocument['paths'] {
  return {
    '/healthz': {
      get: operation({
        summary: 'The process answers',
        tags: ['meta'],
        operationId: 'getHealth',
        security: [],
        responses: { 200: jsonResponse('Alive', ref('Health')) },
      }),
    },
    '/readyz': {
      get: operation({
        summary: 'The database and the signing keys are usable',
        tags: ['meta'],
        operationId: 'getReadiness',
        security: [],
        responses: {
          200: jsonResponse('Ready', ref('Readiness')),
          503: jsonResponse('A dependency is down (which: `checks`)', ref('Readiness')),
        },
      }),
    },
    '/metrics': {
      get: operation({
        summary: 'Prometheus metrics (text exposition format)',
        tags: ['meta'],
        operationId: 'getMetrics',
        security: [],
        responses: { 200: text('The exposition') },
      }),
    },
    [OPENAPI_PATH]: openApiPathItem(title),
  };
}

/**
 * The audit chain and the webhook dispatch log (the outbox), admin only, at the same paths in both
 * services (service-kit/event-admin.ts); `deprecatedAuditPath`: an older path still answered.
 */
export function eventLogPaths(
  security: Array<Record<string, string[]>>,
  options: { deprecatedAuditPath?: string } = {},
): OpenApiDocument['paths'] {
  const count = (name: string, description: string) =>
    queryParam(name, description, { type: 'string', pattern: '^[0-9]{1,15}$' });
  const audit = (path: string, old: boolean): OpenApiDocument['paths'] => {
    const note = old
      ? {
          deprecated: true,
          description:
            `Deprecated: served at \`${AUDIT_PATH}\` in both services; ` + 'answered with a `Deprecation` header.',
        }
      : {};
    const suffix = old ? 'Deprecated' : '';
    return {
      [path]: {
        get: operation({
          summary: 'A page of the hash-chained audit log',
          ...note,
          tags: ['audit'],
          operationId: `listAudit${suffix}`,
          security,
          parameters: [
            count('afterSeq', 'Entries after this sequence number (default 0)'),
            count('limit', 'At most this many (default 100)'),
          ],
          responses: { 200: jsonResponse('Entries, oldest first', ref('AuditPage')) },
        }),
      },
      [`${path}/verify`]: {
        get: operation({
          summary: 'Walks the audit chain and checks every hash',
          ...note,
          tags: ['audit'],
          operationId: `verifyAudit${suffix}`,
          security,
          responses: { 200: jsonResponse('The verdict', ref('AuditVerification')) },
        }),
      },
    };
  };
  return {
    ...audit(AUDIT_PATH, false),
    ...(options.deprecatedAuditPath ? audit(options.deprecatedAuditPath, true) : {}),
    '/admin/webhooks/dispatches': {
      get: operation({
        summary: 'The webhook dispatch log (`failed` is the dead letter)',
        tags: ['webhooks'],
        operationId: 'listDispatches',
        security,
        parameters: [
          queryParam('status', 'Only this status', { enum: ['pending', 'delivered', 'failed'] }),
          count('limit', 'At most this many (default 100)'),
        ],
        responses: { 200: jsonResponse('The deliveries', ref('WebhookDispatches')) },
      }),
    },
    '/admin/anchors': {
      get: operation({
        summary: 'The logs anchored (their heads now) and the chain outbox: anchors and revocation tokens',
        tags: ['audit'],
        operationId: 'listAnchors',
        security,
        parameters: [
          queryParam('status', 'Only this status', { enum: ['pending', 'sent', 'confirmed', 'superseded'] }),
          queryParam('kind', 'Only this kind', { enum: ['anchor', 'revocation'] }),
          count('limit', 'At most this many jobs, newest first (default 100)'),
        ],
        responses: { 200: jsonResponse('The logs and the jobs', ref('Anchors')) },
      }),
    },
    '/admin/webhooks/dispatches/{id}/redeliver': {
      post: operation({
        summary: 'Sends a dead-lettered delivery again, with its webhook-id',
        tags: ['webhooks'],
        operationId: 'redeliverDispatch',
        security,
        parameters: [pathParam('id', 'The dispatch id')],
        responses: { 202: jsonResponse('Queued again', ref('Redelivery')) },
      }),
    },
  };
}

/** The tags of probePaths and eventLogPaths. */
export const SHARED_TAGS = [
  { name: 'meta', description: 'Probes, metrics and this document' },
  { name: 'audit', description: 'The audit chain' },
  { name: 'webhooks', description: 'The webhook dispatch log' },
];
