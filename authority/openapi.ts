/**
 * The policy authority's OpenAPI 3.1 document (spec §4.3): the source of authority/openapi.json
 * (`node scripts/gen-openapi.mjs` writes it) and what GET /openapi.json serves. A test compares
 * its paths with the routes the app registers, and the service tests validate every response
 * they receive against it.
 */
import { LOG_TAG, logPaths } from '../service-kit/tlog/openapi.js';
import { ERROR_CODES } from '../src/index.js';
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
} from '../service-kit/openapi.js';
import {
  ARTIFACT_SCHEMAS,
  SERVICE_SCHEMAS,
  SHARED_TAGS,
  eventLogPaths,
  probePaths,
} from '../service-kit/openapi-schemas.js';
import { SCOPES } from './routes/context.js';

const TITLE = 'CTL policy authority';
type Security = Array<Record<string, string[]>>;
const key: Security = [{ apiKey: [] }];
/** An API key, or none when the body is signed by an enrolled person's DID (PROTOCOL.md §10). */
const keyOrSigned: Security = [{ apiKey: [] }, {}];
const scoped = (scope: string) => `Needs an API key with scope \`${scope}\` (or \`admin\`).`;
const grantIdParam = pathParam('grantId', 'The grant id');
const cacheControl = { 'Cache-Control': { schema: string() } };

const schemas = {
  ...ARTIFACT_SCHEMAS,
  ...SERVICE_SCHEMAS,
  StoredPolicy: object({ policyHash: string(), storedAt: timestamp() }, ['policyHash', 'storedAt']),
  Policy: object({ policyHash: string(), storedAt: timestamp(), policy: { type: 'object' } }, [
    'policyHash',
    'storedAt',
    'policy',
  ]),
  GrantCustody: object(
    { grant: ref('PolicyGrant'), revoked: { type: 'boolean' }, revokedAt: timestamp(), deletedAt: timestamp() },
    ['grant', 'revoked'],
  ),
  SignedRevocation: object(
    {
      version: { const: 1 },
      grantId: string(),
      issuer: string(),
      keyId: string(),
      issuedAt: timestamp(),
      signature: string(),
    },
    ['version', 'grantId', 'issuer', 'keyId', 'issuedAt', 'signature'],
  ),
  Revoked: object(
    {
      grantId: string(),
      // A delegation's: the id bundles and GET /revoke know it by (PROTOCOL.md §14).
      revocationId: string({ pattern: '^[0-9a-f]{64}$' }),
      revoked: { const: true },
      revokedAt: timestamp(),
    },
    ['grantId', 'revoked', 'revokedAt'],
  ),
  Scope: { enum: [...SCOPES] },
  ApiKey: object(
    {
      keyId: string(),
      scopes: array(ref('Scope')),
      label: string(),
      createdAt: timestamp(),
      createdBy: string(),
      revokedAt: { type: ['string', 'null'], format: 'date-time' },
    },
    ['keyId', 'scopes', 'label', 'createdAt', 'createdBy', 'revokedAt'],
  ),
  Human: object(
    { did: string(), label: string(), scope: ref('BundleScope'), enrolledAt: timestamp(), removedAt: timestamp() },
    ['did', 'scope', 'enrolledAt'],
  ),
};

/** Record ids a log inclusion proof may be asked by (GET /log/proof/inclusion): parameter → entry ref prefix. */
export const AUTHORITY_LOG_REFS = { grantId: 'grant:', bundleId: 'bundle:' };

const paths: OpenApiDocument['paths'] = {
  ...logPaths({ grantId: "a grant's id (its issue)", bundleId: "a Trust Bundle's id" }),
  ...probePaths(TITLE),
  '/policies': {
    post: operation({
      summary: 'Stores a policy document; its hash is hex(SHA-256(JCS(policy)))',
      description: scoped('policies:write'),
      tags: ['policies'],
      operationId: 'storePolicy',
      security: key,
      requestBody: jsonBodyOf(object({ policy: { type: 'object' } }, ['policy'])),
      responses: {
        201: jsonResponse('Stored', ref('StoredPolicy')),
        200: jsonResponse('Already stored (the same document)', ref('StoredPolicy')),
      },
    }),
  },
  '/policies/{policyHash}': {
    get: operation({
      summary: 'A stored policy',
      description: scoped('policies:write'),
      tags: ['policies'],
      operationId: 'getPolicy',
      security: key,
      parameters: [pathParam('policyHash', 'hex SHA-256 of the JCS policy')],
      responses: { 200: jsonResponse('The policy', ref('Policy')) },
    }),
  },
  '/grants': {
    post: operation({
      summary: 'Issues a PolicyGrant for a stored policy (or records one signed by an enrolled person)',
      description:
        `${scoped('grants:write')} A \`human-agent\` grant prepared by POST /grants/human/prepare ` +
        'and signed by the person needs no key (PROTOCOL.md §10).',
      tags: ['grants'],
      operationId: 'issueGrant',
      security: keyOrSigned,
      requestBody: jsonBodyOf({ oneOf: [ref('PolicyGrantFields'), ref('PolicyGrant')] }),
      responses: {
        201: jsonResponse('The signed grant', ref('PolicyGrant')),
        403: jsonResponse("`issuer_not_trusted`: a human grant's DID is not enrolled here", ref('Error')),
      },
    }),
  },
  '/grants/{grantId}': {
    get: operation({
      summary: 'A grant in custody, with its state',
      description: scoped('grants:write'),
      tags: ['grants'],
      operationId: 'getGrant',
      security: key,
      parameters: [
        grantIdParam,
        queryParam('includeDeleted', '`true`: a soft-deleted grant too', { enum: ['true', 'false'] }),
      ],
      responses: { 200: jsonResponse('The grant', ref('GrantCustody')) },
    }),
    delete: operation({
      summary: 'Revokes and soft-deletes a grant',
      description: scoped('admin'),
      tags: ['grants'],
      operationId: 'deleteGrant',
      security: key,
      parameters: [grantIdParam],
      responses: { 200: jsonResponse('The grant, revoked and deleted', ref('GrantCustody')) },
    }),
  },
  '/grants/{grantId}/revoke': {
    post: operation({
      summary: 'Revokes a grant (idempotent: the first revokedAt stays)',
      description: scoped('grants:revoke'),
      tags: ['grants'],
      operationId: 'revokeGrantById',
      security: key,
      parameters: [grantIdParam],
      requestBody: jsonBodyOf(object({ reason: string({ maxLength: 500 }) }), false),
      responses: { 200: jsonResponse('Revoked', ref('Revoked')) },
    }),
  },
  '/grants/human/prepare': {
    post: operation({
      summary: 'The exact unsigned grant an enrolled person signs (PROTOCOL.md §10)',
      description: 'No API key: nothing is written.',
      tags: ['humans'],
      operationId: 'prepareHumanGrant',
      security: [],
      requestBody: jsonBodyOf(
        object(
          {
            issuer: string({ description: "The person's did:key" }),
            actorKey: { description: "The agent's public key (JWK or PEM)" },
            maxAmountMinor: minorUnits(),
            currency: string(),
            expiresAt: timestamp(),
            allowedPurposes: array(string()),
            allowedRails: array(string()),
            allowedAssets: array(ref('Asset')),
            destinationAllowlist: array(string()),
            velocity: { type: 'object' },
            offline: { type: 'object' },
          },
          ['issuer', 'actorKey', 'maxAmountMinor', 'currency', 'expiresAt'],
        ),
      ),
      responses: {
        201: jsonResponse(
          'The grant to sign, unchanged, before `signBefore`',
          object({ grant: ref('UnsignedGrant'), signBefore: timestamp() }, ['grant', 'signBefore']),
        ),
        403: jsonResponse('`issuer_not_trusted`: the DID is not enrolled here', ref('Error')),
      },
    }),
  },
  '/revoke': {
    get: operation({
      summary: 'Revocation status of a grant (PROTOCOL.md §5 step 3)',
      description:
        'Public; the asker may keep a "not revoked" answer a few seconds (private: no shared ' +
        'cache), a revoked one an hour.',
      tags: ['grants'],
      operationId: 'revocationStatus',
      security: [],
      parameters: [
        queryParam(
          'grantId',
          "The grant id, or a delegation's revocation id (hex SHA-256 of what the link signs, PROTOCOL.md §14)",
          { type: 'string' },
          true,
        ),
        queryParam(
          'rootGrantId',
          'Beside a delegation revocation id: its root grant; a delegation never revoked is ' +
            'then "not revoked" (else 404)',
          { type: 'string' },
        ),
        queryParam(
          'grantHash',
          "Optional: SHA-256 (hex) of the grant's canonical JSON; a grant held under this id " +
            'with other content is 404, as an unknown one',
          { type: 'string', pattern: '^[0-9a-f]{64}$' },
        ),
      ],
      responses: { 200: jsonResponse('The status', ref('RevocationStatus'), cacheControl) },
    }),
    post: operation({
      summary:
        "Revokes a grant: with an API key, or a `ctl-revocation/1` signed by the grant's DID; " +
        ('a delegation (PROTOCOL.md §14): with its chain, and an API key or a revocation signed ' +
          "by its parent's actorKey"),
      description: scoped('grants:revoke'),
      tags: ['grants'],
      operationId: 'revokeGrant',
      security: keyOrSigned,
      requestBody: jsonBodyOf({
        oneOf: [
          object({ grantId: string(), reason: string({ maxLength: 500 }) }, ['grantId']),
          ref('SignedRevocation'),
          object(
            {
              delegation: { type: 'object', description: 'The ctl-delegation/1 to revoke, its chain inside' },
              revocation: ref('SignedRevocation'),
              reason: string({ maxLength: 500 }),
            },
            ['delegation'],
          ),
        ],
      }),
      responses: { 200: jsonResponse('Revoked', ref('Revoked')) },
    }),
  },
  '/.well-known/ctl-keys.json': {
    get: operation({
      summary: 'The grant keys (JWKS), retired ones while a grant they signed is live',
      tags: ['keys'],
      operationId: 'getJwks',
      security: [],
      responses: { 200: jsonResponse('The JWKS', ref('Jwks'), cacheControl) },
    }),
  },
  '/admin/keys/rotate': {
    post: operation({
      summary: 'Rotates the grant signing key',
      description: scoped('admin'),
      tags: ['keys'],
      operationId: 'rotateGrantKey',
      security: key,
      responses: {
        201: jsonResponse(
          'The new key and the ones retired',
          object({ kid: string(), retired: array(string()) }, ['kid', 'retired']),
        ),
      },
    }),
  },
  '/trust-bundles': {
    post: operation({
      summary: 'Issues a Trust Bundle for a scope (its sequence only grows)',
      description: scoped('bundles:write'),
      tags: ['bundles'],
      operationId: 'issueTrustBundle',
      security: key,
      requestBody: jsonBodyOf(object({ scope: ref('BundleScope'), expiresAt: timestamp() }, ['scope', 'expiresAt'])),
      responses: { 201: jsonResponse('The signed bundle', ref('TrustBundle')) },
    }),
    get: operation({
      summary: 'The latest unexpired bundle of each scope matching the filter',
      tags: ['bundles'],
      operationId: 'listTrustBundles',
      security: [],
      parameters: ['category', 'merchant', 'region'].map((k) =>
        queryParam(k, `Only bundles whose scope has this ${k}`),
      ),
      responses: {
        200: jsonResponse('The bundles', object({ bundles: array(ref('TrustBundle')) }, ['bundles']), cacheControl),
      },
    }),
  },
  '/trust-root': {
    get: operation({
      summary: 'The root chain (PROTOCOL.md §11), from version 2',
      tags: ['bundles'],
      operationId: 'getTrustRoot',
      security: [],
      responses: {
        200: jsonResponse(
          'The statements',
          object({ statements: array(ref('RootStatement')) }, ['statements']),
          cacheControl,
        ),
      },
    }),
    post: operation({
      summary: 'Publishes the next `ctl-root/1` statement',
      description: scoped('admin'),
      tags: ['bundles'],
      operationId: 'publishRootStatement',
      security: key,
      requestBody: jsonBodyOf(object({ statement: ref('RootStatement') }, ['statement'])),
      responses: Object.fromEntries(
        (
          [
            [201, 'Published'],
            [200, 'Already published'],
          ] as const
        ).map(([status, what]) => [
          status,
          jsonResponse(
            what,
            object(
              {
                rootVersion: { type: 'integer' },
                changed: { type: 'boolean' },
                signsBundles: { type: 'boolean' },
                statements: array(ref('RootStatement')),
              },
              ['rootVersion', 'changed', 'signsBundles', 'statements'],
            ),
          ),
        ]),
      ),
    }),
  },
  '/admin/keys': {
    post: operation({
      summary: 'Creates an API key (shown once)',
      description: scoped('admin'),
      tags: ['admin'],
      operationId: 'createApiKey',
      security: key,
      requestBody: jsonBodyOf(
        object({ scopes: array(ref('Scope'), { minItems: 1, uniqueItems: true }), label: string({ maxLength: 200 }) }, [
          'scopes',
          'label',
        ]),
      ),
      responses: {
        201: jsonResponse(
          'The key',
          object(
            { keyId: string(), apiKey: string(), scopes: array(ref('Scope')), label: string(), createdAt: timestamp() },
            ['keyId', 'apiKey', 'scopes', 'label', 'createdAt'],
          ),
        ),
      },
    }),
    get: operation({
      summary: 'Every API key (never the secret)',
      description: scoped('admin'),
      tags: ['admin'],
      operationId: 'listApiKeys',
      security: key,
      responses: { 200: jsonResponse('The keys', object({ keys: array(ref('ApiKey')) }, ['keys'])) },
    }),
  },
  '/admin/keys/{keyId}': {
    delete: operation({
      summary: 'Revokes an API key',
      description: scoped('admin'),
      tags: ['admin'],
      operationId: 'revokeApiKey',
      security: key,
      parameters: [pathParam('keyId', 'The key id')],
      responses: {
        200: jsonResponse('Revoked', object({ keyId: string(), revokedAt: timestamp() }, ['keyId', 'revokedAt'])),
      },
    }),
  },
  ...eventLogPaths(key, { deprecatedAuditPath: '/audit' }),
  '/humans': {
    post: operation({
      summary: "Enrols a person's did:key as a delegator (PROTOCOL.md §10)",
      description: scoped('admin'),
      tags: ['humans'],
      operationId: 'enrolHuman',
      security: key,
      requestBody: jsonBodyOf(
        object({ did: string(), label: string({ maxLength: 200 }), scope: ref('BundleScope') }, ['did']),
      ),
      responses: { 201: jsonResponse('Enrolled', ref('Human')) },
    }),
    get: operation({
      summary: 'The enrolled people',
      description: scoped('admin'),
      tags: ['humans'],
      operationId: 'listHumans',
      security: key,
      parameters: [queryParam('includeRemoved', '`true`: removed people too', { enum: ['true', 'false'] })],
      responses: { 200: jsonResponse('The people', object({ humans: array(ref('Human')) }, ['humans'])) },
    }),
  },
  '/humans/{did}': {
    delete: operation({
      summary: 'Removes a person and revokes every grant they issued that still stands',
      description: scoped('admin'),
      tags: ['humans'],
      operationId: 'removeHuman',
      security: key,
      parameters: [pathParam('did', 'The did:key')],
      responses: {
        200: jsonResponse(
          'Removed',
          object({ did: string(), removedAt: timestamp(), revokedGrants: array(string()) }, [
            'did',
            'removedAt',
            'revokedGrants',
          ]),
        ),
      },
    }),
  },
};

export const AUTHORITY_OPENAPI: OpenApiDocument = openApiDocument({
  title: TITLE,
  version: '1.0.0',
  description:
    'Issues PolicyGrants and Trust Bundles, answers revocation checks, keeps grants in ' +
    'custody (spec §1 part 2, §4.3). Refusals are `{ error: { code, message } }` with ' +
    'a PROTOCOL.md §9 code.',
  errorCodes: ERROR_CODES,
  paths,
  schemas,
  securitySchemes: {
    apiKey: {
      type: 'http',
      scheme: 'bearer',
      description: 'An API key (`Authorization: Bearer <key>`): CTL_ADMIN_API_KEY or one made at POST /admin/keys.',
    },
  },
  tags: [
    ...SHARED_TAGS,
    LOG_TAG,
    { name: 'policies', description: 'Policy documents' },
    { name: 'grants', description: 'PolicyGrants: issue, custody, revocation' },
    { name: 'humans', description: 'The Human-Agent profile (PROTOCOL.md §10)' },
    { name: 'keys', description: 'Signing keys' },
    { name: 'bundles', description: 'Trust Bundles and the root chain (PROTOCOL.md §11)' },
    { name: 'admin', description: 'API keys' },
  ],
});
