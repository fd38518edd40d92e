#!/usr/bin/env node
// `ctl-mcp`: the CTL MCP server on stdio (mcp/main.ts). Installed from its package it runs the
// bundle in dist/; in a clone, the compiled tree (`node scripts/compile.mjs` writes build/).
// --help and --version answer here, before the server reads its configuration.
import { existsSync, readFileSync } from 'node:fs';

const arg = process.argv[2];
if (arg === '--version' || arg === '-V') {
  console.log(JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version);
  process.exit(0);
}
if (arg === '--help' || arg === '-h') {
  console.log(`usage: ctl-mcp             the CTL MCP server on stdio (an MCP client starts it)
       ctl-mcp --help      this text
       ctl-mcp --version   the version

Gives an AI agent a payment gateway session as five tools: paid_fetch, session_status,
list_receipts, delegate_budget, check_log. Logs go to stderr; stdout carries the protocol. It stops
when the client closes stdin. A variable missing or set wrongly stops it with its name (exit 2).

environment:
  CTL_GATEWAY_URL       the gateway's base URL: https:// (plain http:// only for localhost)
  CTL_SESSION_TOKEN     the session's gw_sess_… token, from the owner's POST /sessions (or the console)
  CTL_GATEWAY_LOG_VKEY  optional: the gateway log's verifier key (GET /log/vkey, checked out of band), for check_log
  CTL_LOG_STATE_FILE    optional, with the key: where check_log keeps the last checkpoint it accepted`);
  process.exit(0);
}
if (arg !== undefined) {
  console.error(`ctl-mcp: unknown option ${arg} (ctl-mcp --help)`);
  process.exit(2);
}
const bundle = new URL('../dist/ctl-mcp.mjs', import.meta.url);
await import(existsSync(bundle) ? bundle.href : new URL('../../build/mcp/main.js', import.meta.url).href);
