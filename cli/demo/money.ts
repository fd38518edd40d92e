/**
 * Amounts as the demo prints them: in the currency, never bare minor units (service-kit/money.ts,
 * shared with the other commands and the services). The wire keeps minor units (PROTOCOL.md §1).
 */
export { formatMinor } from '../../service-kit/money.js';
