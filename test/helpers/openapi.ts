/**
 * Checks an HTTP answer against a service's OpenAPI 3.1 document with ajv (2020-12, the dialect
 * of OAS 3.1, plus ajv-formats): the path and method are documented, the status is, and a JSON
 * body matches the response's schema. The service tests' request helpers call it on every
 * answer they receive, so a response that drifts from the document fails the test that saw it.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { OpenApiDocument, Schema } from '../../service-kit/openapi.js';

interface Compiled {
  ajv: Ajv2020;
  /** [regex, template] longest literal prefix first, so /sessions/human/keys wins over /sessions/{id}. */
  templates: Array<[RegExp, string]>;
  validators: Map<string, ValidateFunction>;
}

const compiled = new WeakMap<OpenApiDocument, Compiled>();

function compile(doc: OpenApiDocument): Compiled {
  let c = compiled.get(doc);
  if (c) return c;
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats.default(ajv);
  // The components under one id, so `#/components/schemas/X` refs resolve from any response schema.
  ajv.addSchema({ $id: 'openapi:components', components: doc.components } as Schema, 'openapi:components');
  const templates = Object.keys(doc.paths)
    .map((t): [RegExp, string] => [
      new RegExp(`^${t.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')}$`),
      t,
    ])
    .sort((a, b) => literalLength(b[1]) - literalLength(a[1]));
  c = { ajv, templates, validators: new Map() };
  compiled.set(doc, c);
  return c;
}

const literalLength = (t: string) => t.replace(/\{[^}]+\}/g, '').length;

/** Rewrites local refs to the registered components document. */
function rebase(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(rebase);
  if (!schema || typeof schema !== 'object') return schema;
  return Object.fromEntries(
    Object.entries(schema).map(([k, v]) => [
      k,
      k === '$ref' && typeof v === 'string' && v.startsWith('#/') ? `openapi:components${v}` : rebase(v),
    ]),
  );
}

/**
 * Builds the validator and compiles the envelope now, so the first checked request of a test
 * does not pay ajv's start-up (some tests bound how long a request takes); each operation's
 * schema is compiled on first use (all at once would cost every test process ~0.6 s).
 */
export function compileOpenApi(doc: OpenApiDocument): void {
  validator(compile(doc), 'Error', { $ref: '#/components/schemas/Error' });
}

/** The document's path template that `path` (query ignored) falls under, or undefined. */
export function pathTemplate(doc: OpenApiDocument, path: string): string | undefined {
  const bare = path.split('?')[0]!;
  return compile(doc).templates.find(([re]) => re.test(bare))?.[1];
}

/**
 * Throws when the answer to `method path` is not what `doc` says: an undocumented route answering
 * other than a refusal (an unknown route's 404 is the §9 envelope too), an undocumented status, or a JSON body that
 * does not match the response schema; with `request` (its parsed JSON body), an accepted request whose body the
 * document does not allow. `body` is the parsed JSON, or the text when it is not JSON.
 * @example expectMatchesOpenApi(GATEWAY_OPENAPI, 'GET', '/sessions/sess_1', 200, res.body,
 * res.headers.get('content-type'))
 */
export function expectMatchesOpenApi(
  doc: OpenApiDocument,
  method: string,
  path: string,
  status: number,
  body: unknown,
  contentType?: string | null,
  request?: { body: unknown },
): void {
  const c = compile(doc);
  const where = `${method} ${path} → ${status}`;
  const template = pathTemplate(doc, path);
  const op = template === undefined ? undefined : doc.paths[template]![method.toLowerCase()];
  if (!op) {
    // An unknown route or method is refused by the error middleware, with the envelope; anything else is undocumented.
    if (status < 400)
      throw new Error(
        `OpenAPI: ${where}: ${template ? `method not documented under ${template}` : 'path not documented'}`,
      );
    expectErrorEnvelope(doc, body, where);
    return;
  }
  // A request the service accepted must be one the document allows (so its request schemas are tested too).
  const requestSchema = (op.requestBody as { content?: Record<string, { schema: Schema }> } | undefined)?.content?.[
    'application/json'
  ]?.schema;
  if (request && status < 300 && requestSchema)
    validate(
      c,
      `${method.toUpperCase()} ${template} request`,
      requestSchema,
      request.body,
      `${where} (its request body)`,
    );
  const key = [String(status), `${String(status)[0]}XX`, 'default'].find((k) => k in op.responses);
  if (!key)
    throw new Error(
      `OpenAPI: ${where}: status not documented for ${method} ${template} ` +
        `(documented: ${Object.keys(op.responses).join(', ')})`,
    );
  let response = op.responses[key]! as { $ref?: string; content?: Record<string, { schema: Schema }> };
  if (response.$ref) response = doc.components.responses[response.$ref.split('/').pop()!] as typeof response;
  if (!response.content) return;
  const media = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  const entry = response.content[media] ?? response.content['*/*'];
  if (!entry)
    throw new Error(
      `OpenAPI: ${where}: content type '${media}' not documented ` +
        `(documented: ${Object.keys(response.content).join(', ')})`,
    );
  if (media !== 'application/json') return;
  validate(c, `${method.toUpperCase()} ${template} ${key}`, entry.schema, body, where);
}

/** Throws unless `body` is the §9 envelope `{ error: { code, message } }` of `doc`. */
export function expectErrorEnvelope(doc: OpenApiDocument, body: unknown, where: string): void {
  validate(compile(doc), 'Error', { $ref: '#/components/schemas/Error' }, body, where);
}

function validator(c: Compiled, id: string, schema: Schema): ValidateFunction {
  const known = c.validators.get(id);
  if (known) return known;
  const v = c.ajv.compile(rebase(schema) as Schema);
  c.validators.set(id, v);
  return v;
}

function validate(c: Compiled, id: string, schema: Schema, body: unknown, where: string): void {
  const v = validator(c, id, schema);
  if (!v(body)) {
    const errors = (v.errors ?? []).slice(0, 5).map((e) => {
      const extra = e.params && 'additionalProperty' in e.params ? ` '${e.params.additionalProperty}'` : '';
      return `${e.instancePath || '/'} ${e.message}${extra}`;
    });
    throw new Error(
      `OpenAPI: ${where}: body does not match the document: ${errors.join('; ')}\nbody: ` +
        `${JSON.stringify(body).slice(0, 400)}`,
    );
  }
}
