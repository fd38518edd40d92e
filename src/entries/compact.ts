/**
 * `ctl/compact` (`dist/compact.js`): the compact (CBOR) form of SBAs and Trust Bundles for NFC,
 * BLE, QR and UART links (PROTOCOL.md §6), in its own entry so no other build carries a CBOR codec.
 */
export * from '../compact.js';
