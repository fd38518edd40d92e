/**
 * The anchoring variables (service-kit/anchor/config.ts): nothing set is no anchoring; each
 * mistake is a ConfigError naming the variable, before anything is opened (a service refuses its
 * start, exit 2): a chain without its id, an address that is not one, two signers, half the RPC
 * credentials, a signer whose address is not the pinned one; unknown CTL_ANCHOR_* names are listed.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '../../service-kit/config.js';
import { anchorSettingsFromEnv, anchoringConfigured, openEvmAnchorSigner } from '../../service-kit/anchor/index.js';
import { ANVIL_ACCOUNTS } from '../helpers/anvil.js';
import { startTestAuthority } from '../authority/harness.js';

const dir = mkdtempSync(join(tmpdir(), 'ctl-anchor-config-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));

const evm = { CTL_ANCHOR_EVM_RPC_URL: 'http://127.0.0.1:8545', CTL_ANCHOR_EVM_CHAIN_ID: '31337' };
const refused = (env: Record<string, string>, variable: string, message: RegExp) => {
  try {
    anchorSettingsFromEnv(env);
  } catch (e) {
    assert.instance(e, ConfigError);
    assert.is((e as ConfigError).variable, variable);
    assert.match((e as Error).message, message);
    return;
  }
  assert.unreachable(`accepted: ${JSON.stringify(env)}`);
};

test('nothing set: no anchoring; defaults and unknown names', () => {
  const none = anchorSettingsFromEnv({});
  assert.not.ok(anchoringConfigured(none));
  const s = anchorSettingsFromEnv({
    ...evm,
    CTL_ANCHOR_EVM_CONTRACT: `0x${'11'.repeat(20)}`,
    CTL_ANCHOR_SOL_RPC_URL: 'x',
  });
  assert.is(s.evm!.confirmations, 12);
  assert.is(s.evm!.chainId, 31337);
  assert.equal(s.unknown, ['CTL_ANCHOR_SOL_RPC_URL']);
});

test('each mistake names its variable', () => {
  refused({ CTL_ANCHOR_EVM_RPC_URL: 'http://x' }, 'CTL_ANCHOR_EVM_CHAIN_ID', /required with/);
  refused({ ...evm, CTL_ANCHOR_EVM_CHAIN_ID: '0x1' }, 'CTL_ANCHOR_EVM_CHAIN_ID', /an integer/);
  refused({ ...evm, CTL_ANCHOR_EVM_CONTRACT: '0x1234' }, 'CTL_ANCHOR_EVM_CONTRACT', /20-byte address/);
  refused({ ...evm, CTL_ANCHOR_EVM_RPC_URL: 'ftp://x' }, 'CTL_ANCHOR_EVM_RPC_URL', /http\(s\) URL/);
  refused(
    { ...evm, CTL_ANCHOR_EVM_KEY_FILE: 'a', CTL_ANCHOR_EVM_PKCS11_URI: 'pkcs11:token=t;object=o' },
    'CTL_ANCHOR_EVM_PKCS11_URI',
    /not both/,
  );
  refused({ ...evm, CTL_ANCHOR_EVM_CONFIRMATIONS: '0' }, 'CTL_ANCHOR_EVM_CONFIRMATIONS', /from 1/);
  refused({ CTL_ANCHOR_BTC_RPC_URL: 'http://x' }, 'CTL_ANCHOR_BTC_ADDRESS', /required with/);
  refused(
    {
      CTL_ANCHOR_BTC_RPC_URL: 'http://x',
      CTL_ANCHOR_BTC_ADDRESS: 'rltc1qxyftrmmptg67wyge5dn9v8rp9f7snu3q6unqcs',
      CTL_ANCHOR_BTC_RPC_USER: 'u',
    },
    'CTL_ANCHOR_BTC_RPC_PASSWORD',
    /both or neither/,
  );
  refused({ CTL_ANCHOR_INTERVAL_MS: '10' }, 'CTL_ANCHOR_INTERVAL_MS', /from 1000/);
});

test('a signer that is not the pinned address is refused; an authority does not start with it', async () => {
  const key = join(dir, 'anchor.key');
  writeFileSync(key, ANVIL_ACCOUNTS[1]!.privateKey, { mode: 0o600 });
  const env = {
    ...evm,
    CTL_ANCHOR_EVM_CONTRACT: `0x${'11'.repeat(20)}`,
    CTL_ANCHOR_EVM_KEY_FILE: key,
    CTL_ANCHOR_EVM_ADDRESS: ANVIL_ACCOUNTS[2]!.address,
  };
  await openEvmAnchorSigner(anchorSettingsFromEnv(env).evm!).then(
    () => assert.unreachable('another signer was accepted'),
    (e: ConfigError) => assert.is(e.variable, 'CTL_ANCHOR_EVM_ADDRESS'),
  );
  await startTestAuthority({ env }).then(
    async (t) => (await t.close(), assert.unreachable('the authority started')),
    (e: Error) => assert.match(e.message, /^CTL_ANCHOR_EVM_ADDRESS: the signer's address is 0x70997970/),
  );
  await startTestAuthority({ env: { ...evm, CTL_ANCHOR_EVM_CONTRACT: `0x${'11'.repeat(20)}` } }).then(
    async (t) => (await t.close(), assert.unreachable('the authority started without a signer')),
    (e: Error) => assert.match(e.message, /^CTL_ANCHOR_EVM_KEY_FILE: anchoring on an EVM chain needs a signer/),
  );
});

test.run();
