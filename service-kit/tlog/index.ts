/** The services' transparency log (C2SP tlog-tiles, tlog-checkpoint, tlog-witness; RFC 9162). */
export * from './tiles.js';
export * from './note-key.js';
export * from './schema.js';
export * from './key.js';
export * from './log.js';
export * from './witness.js';
export * from './routes.js';
export * from './service.js';
export * from './entries.js';
export * from './config.js';
export * from './openapi.js';
export * from './store.js';
export * from './sequencer.js';
export * from './high-water.js';
