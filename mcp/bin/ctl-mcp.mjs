#!/usr/bin/env node
// `ctl-mcp`: the CTL MCP server on stdio (mcp/main.ts). Installed from its package it runs the
// bundle in dist/; in a clone, the compiled tree (`node scripts/compile.mjs` writes build/).
import { existsSync } from 'node:fs';

const bundle = new URL('../dist/ctl-mcp.mjs', import.meta.url);
await import(existsSync(bundle) ? bundle.href : new URL('../../build/mcp/main.js', import.meta.url).href);
