/**
 * Every 402 scheme the gateway speaks, in the order it tries them: the first that recognises a
 * 402 pays it, and one that declines it hands it to the next (payments/exchange.ts). MPP first:
 * the stock mppx server offers x402 terms beside its own, and MPP is what it prefers.
 *
 * Adding a scheme is its folder under payments/schemes/ (a SchemeModule: schemes/scheme.ts) and
 * one line in this list.
 */
import { privateKeyToAccount } from 'viem/accounts';
import type { Migration } from '../../service-kit/index.js';
import type { Rail } from './rail.js';
import type { PaymentScheme, SchemeDeps, SchemeModule } from './schemes/scheme.js';
import { mppScheme } from './schemes/mpp/protocol.js';
import { x402Scheme } from './schemes/x402/protocol.js';
import { xPaymentScheme } from './schemes/x-payment/protocol.js';

export const PAYMENT_SCHEMES: readonly SchemeModule[] = [mppScheme, x402Scheme, xPaymentScheme];

/** The schemes' tables (server.ts runs them with the gateway's). */
export const SCHEME_MIGRATIONS: readonly Migration[] = PAYMENT_SCHEMES.flatMap((s) => s.migrations ?? []);

export type SchemeSettings = Omit<SchemeDeps, 'evm'> & {
  evm: Omit<SchemeDeps['evm'], 'account'> & { privateKey: `0x${string}` };
};

/**
 * The schemes made from one set of settings (app.ts): their adapters, in order, for the exchange,
 * the settling rails reconcile asks, and the gateway's EVM address.
 */
export function createPaymentSchemes(o: SchemeSettings): {
  schemes: PaymentScheme[];
  rails: Rail[];
  evmAddress: `0x${string}`;
} {
  const { privateKey, ...evm } = o.evm;
  const d: SchemeDeps = { ...o, evm: { ...evm, account: privateKeyToAccount(privateKey) } };
  return {
    schemes: PAYMENT_SCHEMES.map((s) => s.create(d)),
    rails: PAYMENT_SCHEMES.flatMap((s) => (s.rail ? [s.rail(d)] : [])),
    evmAddress: d.evm.account.address,
  };
}
