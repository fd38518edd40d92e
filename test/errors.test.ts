import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ERROR_CODES, isCtlErrorCode } from '../src/index.js';
import { markdownSection, readDesign } from './helpers/design.js';

// PROTOCOL.md §9 and §16: "codes are API: add, never rename". The backticked snake_case words of
// those sections are the codes; anything else backticked there (`Retry-After`, code samples) is not one.
const protocol = readDesign('PROTOCOL.md');
const codeSections = markdownSection(protocol, 9) + markdownSection(protocol, 16);
const protocolCodes = [...codeSections.matchAll(/`([^`]+)`/g)]
  .map((m) => m[1]!)
  .filter((s) => /^[a-z][a-z0-9_]*$/.test(s));

test('§9 and §16 parse to a plausible list of codes', () => {
  assert.ok(
    protocolCodes.includes('malformed') && protocolCodes.includes('payment_unconfirmed'),
    protocolCodes.join(' '),
  );
  assert.ok(protocolCodes.length >= 40, `only ${protocolCodes.length} codes read from PROTOCOL.md §9`);
});

test('ERROR_CODES holds every code of PROTOCOL.md §9 and §16', () => {
  const missing = protocolCodes.filter((c) => !(ERROR_CODES as readonly string[]).includes(c));
  assert.equal(missing, [], `missing from ERROR_CODES: ${missing.join(', ')}`);
  for (const c of protocolCodes) assert.ok(isCtlErrorCode(c), c);
});

// Service codes this implementation added after the settled text (add, never rename), each
// documented in gateway/README.md "Errors" and docs/sdk-api.md, for the design owners to fold in.
const ADDED_BEYOND_PROTOCOL = [
  'paid_response_lost',
  // The transparency log's verifier (docs/sdk-api.md "Transparency log").
  'log_proof_invalid',
  'log_inconsistent',
  'checkpoint_signature_invalid',
  'checkpoint_cosignatures_insufficient',
  'checkpoint_origin_mismatch',
];

test('ERROR_CODES holds nothing §9 and §16 do not name (beyond the listed additions), and no code twice', () => {
  const extra = ERROR_CODES.filter((c) => !protocolCodes.includes(c) && !ADDED_BEYOND_PROTOCOL.includes(c));
  assert.equal(extra, [], `in ERROR_CODES but not in PROTOCOL.md §9 or §16: ${extra.join(', ')}`);
  assert.is(new Set(ERROR_CODES).size, ERROR_CODES.length);
});

test.run();
