// `npm start` wires the gateway to the authority it starts beside: a person enrolled there can back
// a session (PROTOCOL.md §10). The authority is reached through the authority checks' own exception,
// so CTL_GATEWAY_ALLOW_TARGETS (what agents may reach through /proxy) is left as the operator set it.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startEnvironments } from '../../cli/start.js';

const keys = { authorityAdminKey: 'a'.repeat(32), gatewayAdminKey: 'g'.repeat(32) } as never;

test('the gateway trusts the authority started beside it, without opening it to /proxy', () => {
  const { gateway } = startEnvironments({}, './data', keys);
  assert.is(gateway['CTL_GATEWAY_HUMAN_AUTHORITIES'], 'http://127.0.0.1:8700');
  assert.is(gateway['CTL_GATEWAY_ALLOW_TARGETS'], undefined);
  const moved = startEnvironments(
    { AUTHORITY_PORT: '9700', CTL_GATEWAY_ALLOW_TARGETS: '127.0.0.1:3000' },
    './data',
    keys,
  ).gateway;
  assert.is(moved['CTL_GATEWAY_HUMAN_AUTHORITIES'], 'http://127.0.0.1:9700');
  assert.is(moved['CTL_GATEWAY_ALLOW_TARGETS'], '127.0.0.1:3000');
  // What the operator set wins.
  const own = startEnvironments({ CTL_GATEWAY_HUMAN_AUTHORITIES: 'https://authority.example' }, './data', keys).gateway;
  assert.is(own['CTL_GATEWAY_HUMAN_AUTHORITIES'], 'https://authority.example');
});

test.run();
