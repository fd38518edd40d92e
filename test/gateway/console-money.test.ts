/**
 * The console's money helpers (gateway/console/dom.ts): what a person types in major units
 * becomes the exact minor-unit string the API takes, and minor units are shown exactly, with
 * BigInt only (PROTOCOL.md §1) — a budget typed as 0.1 + 0.2 must be 30, not 30.000000000000004.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { toMinor, formatMoney, currencyDigits } from '../../gateway/console/dom.js';

test('typed amounts become exact minor units, or an error saying why', () => {
  assert.equal(toMinor('3.00', 2), { minor: '300' });
  assert.equal(toMinor('2', 2), { minor: '200' });
  assert.equal(toMinor('12.5', 2), { minor: '1250' });
  assert.equal(toMinor(' 1,234.56 ', 2), { minor: '123456' });
  assert.equal(toMinor('0.30', 2), { minor: '30' });
  assert.equal(toMinor('90071992547409.91', 2), { minor: '9007199254740991' });
  assert.equal(toMinor('1.000001', 6), { minor: '1000001' });
  assert.equal(toMinor('500', 0), { minor: '500' });
  assert.ok('error' in toMinor('1.005', 2), 'more digits than the currency has');
  assert.ok('error' in toMinor('1.5', 0));
  for (const bad of ['', '-1', '1e3', 'abc', '1.2.3', '+1', '.5']) assert.ok('error' in toMinor(bad, 2), bad);
  assert.equal(toMinor('250', undefined), { minor: '250' }, 'unknown asset: minor units as typed');
});

test('minor units are shown in major units with the currency exponent', () => {
  assert.is(formatMoney('123456', 'USD'), '1,234.56 USD');
  assert.is(formatMoney('5', 'USD'), '0.05 USD');
  assert.is(formatMoney('0', 'EUR'), '0.00 EUR');
  assert.is(formatMoney('1500', 'JPY'), '1,500 JPY');
  assert.is(formatMoney('1234', 'KWD'), '1.234 KWD');
  assert.is(formatMoney('1500000', 'USDC'), '1.500000 USDC');
  assert.is(formatMoney('9007199254740993', 'USD'), '90,071,992,547,409.93 USD', 'beyond 2^53, exactly');
  assert.is(formatMoney('42', 'POINTS'), '42 minor units of POINTS');
  // A well-formed code that is not ISO 4217: its exponent is not guessed (Intl would say 2).
  assert.is(formatMoney('1250', 'XYZ'), '1,250 minor units of XYZ');
  assert.is(currencyDigits('XYZ'), undefined);
  assert.is(currencyDigits('USD'), 2);
  assert.is(currencyDigits('ZZ1'), undefined);
});

test.run();
