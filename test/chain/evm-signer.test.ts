/**
 * secp256k1 signers for EVM transactions: a key file and a key made inside SoftHSM2 (PKCS#11,
 * CKM_ECDSA on secp256k1). Each signs a transaction that anvil accepts from its address; a key
 * file others can read, a token key of another curve and a missing key are refused with one line.
 * The token's key anchors through the EVM ledger as a key file does.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPublicClient, createWalletClient, http, parseEther, recoverAddress, keccak256, defineChain } from 'viem';
import { createSoftHsm, SOFTHSM_MODULE } from '../helpers/softhsm.js';
import { startAnvil, deployContract, type Anvil } from '../helpers/anvil.js';
import { createEvmLedger } from '../../service-kit/anchor/index.js';
import { closePkcs11Modules, generatePkcs11Key } from '../../service-kit/signers/index.js';
import {
  evmAccount,
  evmKeyFileSigner,
  generatePkcs11EvmKey,
  openPkcs11EvmSigner,
  type EvmSigner,
} from '../../service-kit/chain/evm-signer.js';

const hsm = createSoftHsm(['ctl']);
const dir = mkdtempSync(join(tmpdir(), 'ctl-evm-signer-'));
let anvil: Anvil;

test.before(async () => {
  anvil = await startAnvil();
});
test.after(async () => {
  await anvil.stop();
  closePkcs11Modules();
  hsm.remove();
  rmSync(dir, { recursive: true, force: true });
});

/** Funds `signer` from anvil's first account, then has it send a transfer the node accepts. */
async function sendsOnAnvil(signer: EvmSigner) {
  const chain = defineChain({
    id: anvil.chainId,
    name: 'anvil',
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [anvil.url] } },
  });
  const pub = createPublicClient({ chain, transport: http(anvil.url) });
  await anvil.rpc('anvil_setBalance', [signer.address, '0xde0b6b3a7640000']);
  const wallet = createWalletClient({ chain, transport: http(anvil.url), account: await evmAccount(signer) });
  const hash = await wallet.sendTransaction({ to: anvil.accounts[1]!.address, value: parseEther('0.01') });
  const receipt = await pub.waitForTransactionReceipt({ hash });
  assert.is(receipt.status, 'success');
  assert.is(receipt.from.toLowerCase(), signer.address.toLowerCase());
}

test('a key file signs transactions anvil accepts; a file others can read is refused', async () => {
  const path = join(dir, 'anchor.key');
  writeFileSync(path, `${anvil.accounts[2]!.privateKey}\n`, { mode: 0o600 });
  const s = await evmKeyFileSigner(path);
  assert.is(s.address, anvil.accounts[2]!.address);
  await sendsOnAnvil(s);
  chmodSync(path, 0o644);
  await evmKeyFileSigner(path).then(
    () => assert.unreachable('a readable key file was accepted'),
    (e: Error) => assert.match(e.message, /accessible by others.*chmod 600/),
  );
  writeFileSync(join(dir, 'bad.key'), 'not hex', { mode: 0o600 });
  await evmKeyFileSigner(join(dir, 'bad.key')).then(
    () => assert.unreachable('a malformed key file was accepted'),
    (e: Error) => assert.match(e.message, /64 hex/),
  );
});

test('a secp256k1 key made in SoftHSM2 signs low-S, recoverable transactions anvil accepts', async () => {
  const made = await generatePkcs11EvmKey(hsm.uri('anchor'), { modulePath: SOFTHSM_MODULE });
  const address = made.address;
  await made.close();
  const s = await openPkcs11EvmSigner(hsm.uri('anchor'), { modulePath: SOFTHSM_MODULE });
  assert.is(s.address, address);
  for (let i = 0; i < 8; i++) {
    const digest = keccak256(new Uint8Array([i]));
    const sig = await s.signDigest(digest);
    assert.ok(BigInt(sig.s) <= 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0n, 'low-S');
    assert.is((await recoverAddress({ hash: digest, signature: sig })).toLowerCase(), address.toLowerCase());
  }
  await sendsOnAnvil(s);
  // And as the anchoring signer: the EVM ledger anchors with the token's key.
  const contract = await deployContract(anvil, 'CtlAnchor', [s.address]);
  const ledger = await createEvmLedger({
    rpcUrl: anvil.url,
    chainId: anvil.chainId,
    signer: s,
    anchorContract: contract,
    confirmations: 1,
  });
  const head = { origin: 'hsm.test/log', size: 1, root: 'ab'.repeat(32) };
  const tx = await ledger.prepare({ kind: 'anchor', head, source: 'checkpoint' });
  await ledger.broadcast(tx);
  const st = await ledger.status(tx);
  assert.is(st.state, 'mined');
  await ledger.close!(); // closes the signer
  await generatePkcs11EvmKey(hsm.uri('anchor'), { modulePath: SOFTHSM_MODULE }).then(
    () => assert.unreachable('a taken label was overwritten'),
    (e: Error) => assert.match(e.message, /already holds a key labelled 'anchor'/),
  );
});

test('a token key of another curve, or no key, is refused with one line', async () => {
  const p256 = await generatePkcs11Key(hsm.uri('p256'), { modulePath: SOFTHSM_MODULE, alg: 'ES256' });
  await p256.close();
  await openPkcs11EvmSigner(hsm.uri('p256'), { modulePath: SOFTHSM_MODULE }).then(
    () => assert.unreachable('a P-256 key was taken for secp256k1'),
    (e: Error) => assert.match(e.message, /not a secp256k1 key/),
  );
  await openPkcs11EvmSigner(hsm.uri('nothing'), { modulePath: SOFTHSM_MODULE }).then(
    () => assert.unreachable('a missing key was accepted'),
    (e: Error) => assert.match(e.message, /no private key match/),
  );
});

test.run();
