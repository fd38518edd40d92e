import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  isAmount,
  parseAmount,
  parsePaymentAmount,
  isCurrency,
  isPurpose,
  isPurposePattern,
  purposeAllowed,
  parseTimestamp,
  formatTimestamp,
  isIdentifier,
  newId,
  CtlError,
} from '../../src/index.js';

const isMalformed = (e: unknown) => e instanceof CtlError && e.code === 'malformed';

test('amounts: exactly ^(0|[1-9][0-9]{0,37})$, parsed with BigInt', () => {
  for (const ok of ['0', '1', '10', '9'.repeat(38)]) assert.ok(isAmount(ok), ok);
  for (const bad of ['01', '-1', '+1', '1e3', '1.0', ' 1', '1 ', '', '9'.repeat(39), '０', 1, null]) {
    assert.not.ok(isAmount(bad), String(bad));
    assert.throws(() => parseAmount(bad, 'amount'), isMalformed);
  }
  assert.is(parseAmount('9007199254740993', 'x'), 9007199254740993n);
  assert.throws(
    () => parsePaymentAmount('0', 'amount'),
    (e: unknown) => isMalformed(e) && /greater than zero/.test((e as Error).message),
  );
});

test('currency, purpose, identifier rules', () => {
  assert.ok(
    isCurrency('USD') && isCurrency('USDC') && !isCurrency('usd') && !isCurrency('US') && !isCurrency('ABCDEFGHIJKLM'),
  );
  assert.ok(
    isPurpose('ev:charging') &&
      isPurpose('api:search.v2') &&
      !isPurpose('ev') &&
      !isPurpose('EV:charging') &&
      !isPurpose('ev:*'),
  );
  assert.ok(isPurposePattern('api:*') && !isPurposePattern('*') && !isPurposePattern('*:*'));
  assert.ok(purposeAllowed('api:search', ['api:*']) && purposeAllowed('ev:charging', ['ev:charging']));
  assert.not.ok(
    purposeAllowed('api:search', []) ||
      purposeAllowed('apix:search', ['api:*']) ||
      purposeAllowed('ev:parking', ['ev:charging']),
  );
  assert.ok(
    isIdentifier('grant_1:a.b-c') && !isIdentifier('') && !isIdentifier('a b') && !isIdentifier('x'.repeat(129)),
  );
});

test('timestamps: RFC 3339 UTC with Z only', () => {
  assert.is(parseTimestamp('2026-11-22T10:00:00Z', 't'), Date.UTC(2026, 10, 22, 10));
  assert.is(parseTimestamp('2026-11-22T10:00:00.5Z', 't'), Date.UTC(2026, 10, 22, 10) + 500);
  // Fractions below the ms are kept as far as a double can (the verifier's clock is in ms).
  assert.is(parseTimestamp('2026-11-22T10:00:00.0005Z', 't'), Date.UTC(2026, 10, 22, 10) + 0.5);
  assert.ok(parseTimestamp('2026-11-22T10:00:00.123456789Z', 't') - Date.UTC(2026, 10, 22, 10) > 123.456);
  for (const bad of [
    '2026-11-22T10:00:00+00:00',
    '2026-11-22T10:00:00z',
    '2026-11-22 10:00:00Z',
    '2026-02-30T00:00:00Z',
    '2026-11-22T24:00:00Z',
    '2026-11-22T10:00:60Z',
    '2026-11-22T10:00:00.Z',
    '2026-11-22T10:00:00.1234567890Z',
    '2026-11-22',
    1,
  ]) {
    assert.throws(
      () => parseTimestamp(bad, 'expiresAt'),
      (e: unknown) => isMalformed(e) && /expiresAt/.test((e as Error).message),
      String(bad),
    );
  }
  assert.is(formatTimestamp(Date.UTC(2026, 0, 1)), '2026-01-01T00:00:00Z');
  assert.is(formatTimestamp(Date.UTC(2026, 0, 1) + 250), '2026-01-01T00:00:00.250Z');
});

test('newId: prefix + 128 random bits, unique', () => {
  const ids = new Set(Array.from({ length: 1000 }, () => newId('rcpt_')));
  assert.is(ids.size, 1000);
  for (const id of ids) assert.ok(/^rcpt_[A-Za-z0-9_-]{22}$/.test(id) && isIdentifier(id), id);
});

test.run();
