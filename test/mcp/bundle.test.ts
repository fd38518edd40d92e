/**
 * The ctl-mcp package runs a bundle (scripts/bundle-packages.mjs, its prepack), not the compiled
 * tree: the bundle builds, imports only the packages mcp/package.json declares, and serves the
 * same tools to an MCP client.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));

test('the bundle builds and lists the tools over stdio', async () => {
  // Inside the repository, so the bundle's external imports resolve from its node_modules.
  const dir = mkdtempSync(join(root, 'build', 'mcp-bundle-'));
  try {
    const outfile = join(dir, 'ctl-mcp.mjs');
    const built = spawnSync(process.execPath, [join(root, 'scripts', 'bundle-packages.mjs'), 'mcp', '--out', dir], {
      cwd: root,
      encoding: 'utf8',
    });
    assert.is(built.status, 0, built.stderr);
    const client = new Client({ name: 'bundle-test', version: '1.0.0' });
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [outfile],
        env: { CTL_GATEWAY_URL: 'http://127.0.0.1:9', CTL_SESSION_TOKEN: 'gw_sess_abc' },
        stderr: 'pipe',
      }),
    );
    try {
      assert.equal((await client.listTools()).tools.map((t) => t.name).sort(), [
        'check_log',
        'delegate_budget',
        'list_receipts',
        'paid_fetch',
        'session_status',
      ]);
      const pkg = JSON.parse(readFileSync(join(root, 'mcp', 'package.json'), 'utf8'));
      assert.equal(
        client.getServerVersion(),
        { name: pkg.name, version: pkg.version },
        'the server names itself as its package does',
      );
    } finally {
      await client.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
