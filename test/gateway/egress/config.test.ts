/**
 * The egress proxy's variables: off unless CTL_GATEWAY_EGRESS_PORT is set; pass-through globs
 * split at top-level commas (a brace's comma is the glob's), and a bad one refuses the start; the
 * CONNECT rate limit per session.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { DEFAULT_CONNECT_LIMIT, egressFromEnv, parsePassThrough } from '../../../gateway/egress/config.js';
import { readGatewayConfig } from '../../../gateway/config.js';
import { proxyToken } from '../../../gateway/egress/auth.js';

test('off unless the port is set; the port and globs read as ctl gateway reads them', () => {
  assert.is(egressFromEnv({}), undefined);
  assert.is(readGatewayConfig({}).egress, undefined);
  assert.equal(
    readGatewayConfig({
      CTL_GATEWAY_EGRESS_PORT: '8403',
      CTL_GATEWAY_EGRESS_PASS_THROUGH: '*.Bank.example, pinned.example.{com,net}',
    }).egress,
    {
      port: 8403,
      host: undefined,
      passThrough: ['*.bank.example', 'pinned.example.{com,net}'],
      connectLimit: DEFAULT_CONNECT_LIMIT,
    },
  );
  // CONNECTs per session: N/Ss as the other rate limits, 0 for none.
  const limit = (v: string) => egressFromEnv({ CTL_GATEWAY_EGRESS_PORT: '0', CTL_GATEWAY_EGRESS_CONNECT_LIMIT: v });
  assert.equal(limit('30/10s')!.connectLimit, { points: 30, seconds: 10 });
  assert.is(limit('0')!.connectLimit, false);
  assert.is(egressFromEnv({ CTL_GATEWAY_EGRESS_PORT: '0', CTL_GATEWAY_EGRESS_HOST: '0.0.0.0' })!.host, '0.0.0.0');
});

test('a bad value refuses the start naming the variable', () => {
  for (const [env, variable] of [
    [{ CTL_GATEWAY_EGRESS_PORT: '70000' }, 'CTL_GATEWAY_EGRESS_PORT'],
    [{ CTL_GATEWAY_EGRESS_PORT: 'x' }, 'CTL_GATEWAY_EGRESS_PORT'],
    [{ CTL_GATEWAY_EGRESS_PORT: '8403', CTL_GATEWAY_EGRESS_PASS_THROUGH: 'a b' }, 'CTL_GATEWAY_EGRESS_PASS_THROUGH'],
    [{ CTL_GATEWAY_EGRESS_PORT: '8403', CTL_GATEWAY_EGRESS_PASS_THROUGH: 'x.{a}' }, 'CTL_GATEWAY_EGRESS_PASS_THROUGH'],
    [{ CTL_GATEWAY_EGRESS_PASS_THROUGH: 'a.example' }, 'CTL_GATEWAY_EGRESS_PASS_THROUGH'],
    [{ CTL_GATEWAY_EGRESS_PORT: '8403', CTL_GATEWAY_EGRESS_CONNECT_LIMIT: 'lots' }, 'CTL_GATEWAY_EGRESS_CONNECT_LIMIT'],
    [{ CTL_GATEWAY_EGRESS_CONNECT_LIMIT: '10/1s' }, 'CTL_GATEWAY_EGRESS_CONNECT_LIMIT'],
  ] as const) {
    assert.throws(
      () => egressFromEnv(env),
      (e: Error) => e.message.startsWith(`${variable}:`),
      JSON.stringify(env),
    );
  }
  assert.equal(parsePassThrough(' , ,'), []);
});

test('the token of a Basic proxy credential: the password, else the user name', () => {
  const basic = (s: string) => `Basic ${Buffer.from(s).toString('base64')}`;
  assert.is(proxyToken(basic('agent:gw_sess_abc')), 'gw_sess_abc');
  assert.is(proxyToken(basic('gw_sess_abc:')), 'gw_sess_abc');
  assert.is(proxyToken(basic('agent:gw%5Fsess')), 'gw_sess');
  assert.is(proxyToken('Bearer gw_sess_abc'), undefined);
  assert.is(proxyToken(basic(':')), undefined);
  assert.is(proxyToken(undefined), undefined);
});

test.run();
