/**
 * The host's native backend: node:crypto where the host has it, else WebCrypto, else none (noble
 * then). The role IIFEs swap in native-none.ts (rollup.config.mjs): an embedded engine has neither.
 */
import { hostSubtle } from '../host.js';
import { createNodeBackend } from './node-backend.js';
import { createSubtleBackend } from './subtle-backend.js';
import type { Backend } from './backend.js';

/** @example createNativeBackend(hostNodeCrypto())?.name // 'native' on Node */
export function createNativeBackend(nc: any): Backend | undefined {
  const subtle = hostSubtle();
  return nc ? createNodeBackend(nc) : subtle ? createSubtleBackend(subtle) : undefined;
}
