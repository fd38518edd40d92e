/**
 * Amounts as a person reads them (service-kit/money.ts): the ISO 4217 exponent for fiat, the
 * token's decimals for stablecoins, and "minor units of" where the exponent is not known.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { currencyExponent, formatMinor } from '../../service-kit/money.js';

test('fiat by its ISO 4217 exponent', () => {
  assert.is(formatMinor('1250', 'EUR'), '12.50 EUR');
  assert.is(formatMinor('5', 'USD'), '0.05 USD');
  assert.is(formatMinor('0', 'USD'), '0.00 USD');
  assert.is(formatMinor('1250', 'JPY'), '1250 JPY');
  assert.is(formatMinor('1250', 'KWD'), '1.250 KWD');
  assert.is(formatMinor(123456789012345678901234567890n, 'EUR'), '1234567890123456789012345678.90 EUR');
  assert.is(formatMinor('-250', 'EUR'), '-2.50 EUR');
});

test('stablecoins by their decimals', () => {
  assert.is(formatMinor('10000', 'USDC'), '0.010000 USDC');
  assert.is(currencyExponent('USDC'), 6);
});

test('an unknown unit is never guessed: minor units, named', () => {
  assert.is(currencyExponent('XYZ'), undefined);
  assert.is(formatMinor('1250', 'XYZ'), '1250 minor units of XYZ');
  assert.is(formatMinor('7', 'points'), '7 minor units of points');
  assert.is(formatMinor('not a number', 'EUR'), 'not a number EUR');
});

test.run();
