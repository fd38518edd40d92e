/**
 * The example bodies of authority/README.md ("Issuing a grant, end to end") are real: POSTed as
 * written to the authority, the policy answers the hash the README shows and the grant is issued
 * with `allowedAssets` in the `[{ standard, code }]` shape of PROTOCOL.md §4.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { root } from '../../firmware-bridge/node/device-script.js';
import { startTestAuthority } from './harness.js';

const readme = readFileSync(join(root, 'authority', 'README.md'), 'utf8');

/** The JSON block that follows `<!-- example: <name> -->`. */
function example(name: string): any {
  const m = new RegExp(`<!-- example: ${name} -->\\s*\`\`\`json\\n([\\s\\S]*?)\`\`\``).exec(readme);
  assert.ok(m, `README example ${name}`);
  return JSON.parse(m![1]!);
}

test('README: POST /policies and POST /grants as written', async () => {
  const t = await startTestAuthority();
  try {
    const policy = await t.call('POST', '/policies', example('POST /policies'));
    assert.is(policy.status, 201, JSON.stringify(policy.body));
    const body = example('POST /grants');
    assert.ok(
      readme.includes(`"policyHash": "${policy.body.policyHash}"`),
      'the README shows the hash the authority answers',
    );
    assert.is(body.policyHash, policy.body.policyHash);
    assert.ok(
      Array.isArray(body.allowedAssets) &&
        body.allowedAssets.every((a: object) => Object.keys(a).sort().join() === 'code,standard'),
      'allowedAssets: [{ standard, code }]',
    );
    // Only the expiry moves, so the example keeps working after its date has passed.
    if (Date.parse(body.expiresAt) <= Date.now())
      body.expiresAt = new Date(Date.now() + 3600_000).toISOString().replace(/\.\d+Z$/, 'Z');
    const grant = await t.call('POST', '/grants', body);
    assert.is(grant.status, 201, JSON.stringify(grant.body));
    assert.equal(grant.body.allowedAssets, [{ standard: 'iso4217', code: 'EUR' }]);
    assert.equal(grant.body.actorKey, body.actorKey);
  } finally {
    await t.close();
  }
});

test.run();
