/**
 * RFC 7512 `pkcs11:` URIs: which token, which object, and where the PIN comes from.
 *
 *     pkcs11:token=ctl;object=grant-2026?pin-source=file:///run/secrets/hsm-pin
 *
 * Path attributes (`;`-separated) name the token and the object; query attributes (`&`-separated)
 * say how to log in (`pin-source` or `pin-value`) and, optionally, which module to load
 * (`module-path`). Values are percent-decoded (RFC 7512 §2.3); `id` is bytes. An attribute the
 * RFC does not define (and that is not a vendor `x-` one), a repeated attribute or both PIN
 * attributes are refused: a typo must never widen the match to another key.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export interface Pkcs11Uri {
  token?: string;
  manufacturer?: string;
  serial?: string;
  model?: string;
  /** CKA_LABEL of the key. */
  object?: string;
  /** CKA_ID of the key, as bytes. */
  id?: Uint8Array;
  type?: 'private' | 'public' | 'cert' | 'secret-key' | 'data';
  slotId?: number;
  pinValue?: string;
  /** A file path (or `file:` URI) whose content, less a trailing newline, is the PIN. */
  pinSource?: string;
  modulePath?: string;
  /** The URI with any `pin-value` masked, for logs and errors. */
  redacted: string;
}

const PATH_ATTRS = new Set([
  'token',
  'manufacturer',
  'serial',
  'model',
  'library-manufacturer',
  'library-description',
  'library-version',
  'object',
  'type',
  'id',
  'slot-description',
  'slot-manufacturer',
  'slot-id',
]);
const QUERY_ATTRS = new Set(['pin-source', 'pin-value', 'module-name', 'module-path']);
const TYPES = new Set(['private', 'public', 'cert', 'secret-key', 'data']);

function decode(value: string, what: string): Uint8Array {
  const out: number[] = [];
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (value[i] === '%') {
      const hex = value.slice(i + 1, i + 3);
      if (!/^[0-9A-Fa-f]{2}$/.test(hex)) throw new RangeError(`pkcs11 URI: bad percent-encoding in ${what}`);
      out.push(parseInt(hex, 16));
      i += 2;
    } else if (c > 0x20 && c < 0x7f) {
      out.push(c);
    } else {
      throw new RangeError(`pkcs11 URI: ${what} has a character that must be percent-encoded`);
    }
  }
  return Uint8Array.from(out);
}

const text = (value: string, what: string) => new TextDecoder('utf-8', { fatal: true }).decode(decode(value, what));

/**
 * Parses an RFC 7512 URI. Throws a RangeError naming the defect (never echoing a `pin-value`).
 * @example parsePkcs11Uri('pkcs11:token=ctl;object=root?pin-value=1234').object // 'root'
 */
export function parsePkcs11Uri(uri: string): Pkcs11Uri {
  if (!/^pkcs11:/i.test(uri)) throw new RangeError("pkcs11 URI: must start with 'pkcs11:'");
  const body = uri.slice('pkcs11:'.length);
  const q = body.indexOf('?');
  const pathPart = q < 0 ? body : body.slice(0, q);
  const queryPart = q < 0 ? '' : body.slice(q + 1);
  const attrs = new Map<string, string>();
  const take = (part: string, sep: string, known: Set<string>) => {
    if (part === '') return;
    for (const item of part.split(sep)) {
      const eq = item.indexOf('=');
      if (eq <= 0)
        throw new RangeError(`pkcs11 URI: '${item.startsWith('pin-value') ? 'pin-value' : item}' is not name=value`);
      const name = item.slice(0, eq).toLowerCase();
      if (!known.has(name) && !name.startsWith('x-')) throw new RangeError(`pkcs11 URI: unknown attribute '${name}'`);
      if (attrs.has(name)) throw new RangeError(`pkcs11 URI: attribute '${name}' given twice`);
      attrs.set(name, item.slice(eq + 1));
    }
  };
  take(pathPart, ';', PATH_ATTRS);
  take(queryPart, '&', QUERY_ATTRS);
  if (attrs.has('pin-value') && attrs.has('pin-source'))
    throw new RangeError('pkcs11 URI: give pin-value or pin-source, not both');
  const out: Pkcs11Uri = { redacted: uri.replace(/pin-value=[^&]*/i, 'pin-value=***') };
  const str = (name: string) => (attrs.has(name) ? text(attrs.get(name)!, name) : undefined);
  out.token = str('token');
  out.manufacturer = str('manufacturer');
  out.serial = str('serial');
  out.model = str('model');
  out.object = str('object');
  if (attrs.has('id')) out.id = decode(attrs.get('id')!, 'id');
  const type = str('type');
  if (type !== undefined) {
    if (!TYPES.has(type)) throw new RangeError(`pkcs11 URI: type must be one of ${[...TYPES].join(', ')}`);
    out.type = type as Pkcs11Uri['type'];
  }
  const slot = str('slot-id');
  if (slot !== undefined) {
    if (!/^[0-9]{1,10}$/.test(slot)) throw new RangeError('pkcs11 URI: slot-id must be a decimal number');
    out.slotId = Number(slot);
  }
  out.pinValue = str('pin-value');
  out.pinSource = str('pin-source');
  out.modulePath = str('module-path');
  for (const k of Object.keys(out) as (keyof Pkcs11Uri)[]) if (out[k] === undefined) delete out[k];
  return out;
}

/**
 * The PIN a URI names: `pin-value`, or the content of `pin-source` (a path or `file:` URI) less
 * one trailing newline; undefined when neither is given (a token without login).
 * @example readPin(parsePkcs11Uri('pkcs11:token=ctl?pin-source=/run/secrets/pin'))
 */
export function readPin(uri: Pkcs11Uri): string | undefined {
  if (uri.pinValue !== undefined) return uri.pinValue;
  if (uri.pinSource === undefined) return undefined;
  const path = uri.pinSource.startsWith('file:') ? fileURLToPath(uri.pinSource) : uri.pinSource;
  let pin: string;
  try {
    pin = readFileSync(path, 'utf8');
  } catch (e) {
    throw new Error(
      `pin-source '${path}' cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
    );
  }
  return pin.replace(/\r?\n$/, '');
}
