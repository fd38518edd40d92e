/**
 * The full tamper campaigns (slow tier): 10,000 random edits to the gateway log's served
 * checkpoint, tiles and entry bundles, and 3,334 to the stored rows (entries, tiles, the
 * checkpoint) of a copy of its database, each caught by `ctl log audit` (log-audit.test.ts runs
 * 300 and 100 of them in the fast tier).
 */
process.env.CTL_LOG_TAMPER_EDITS ??= '10000';
await import('./log-audit.test.js');
