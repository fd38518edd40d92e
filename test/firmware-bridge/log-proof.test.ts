/**
 * A terminal checks that a receipt it was shown is in the gateway's log (firmware-bridge/log-ops.ts):
 * it pins the log's key and its witnesses once, then verifies a C2SP tlog-proof for the receipt
 * offline. The verifier bundle in QuickJS answers byte for byte as the same device code on Node;
 * the pins survive a reboot; the wallet bundle has no such op.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as Verify from '../../src/entries/verify.js';
import { generateKeyPair, importSigningKey } from '../../src/index.js';
import * as L from '../../src/entries/log.js';
import { cborDecode, cborEncode } from '../../src/encoding/cbor.js';
import { createDevice } from '../../firmware-bridge/device.js';
import { handlePayload } from '../../firmware-bridge/protocol.js';
import { createNodeAbi } from '../../firmware-bridge/node/test-abi.js';
import { createQuickJsDevice } from '../../firmware-bridge/node/quickjs-device.js';

const key = async () => importSigningKey((await generateKeyPair()).privateKeyPem);
const ORIGIN = 'ctl.example/gateway-log';
const log = L.createNoteSigner(ORIGIN, await key());
const w = [L.createCosigner('w1.example', await key()), L.createCosigner('w2.example', await key())];
const receipt = {
  version: 1,
  receiptId: 'rcpt_terminal',
  sessionId: 'sess_1',
  amount: { amountMinor: '1250', currency: 'EUR' },
  merchant: 'charger-17',
  signature: 'c2lnbmF0dXJl',
};
const entries = Array.from({ length: 40 }, (_, i) =>
  i === 33 ? L.logEntry('receipt', receipt) : L.utf8Encode(`e${i}`),
);
const leaves = entries.map(L.leafHash);
const read: L.ReadHashes = (nodes) =>
  nodes.map((n) => L.rootFromLeafHashes(leaves.slice(n.index * 2 ** n.level, (n.index + 1) * 2 ** n.level)));
const note = await L.signCheckpoint({ origin: ORIGIN, size: 40, rootHash: await L.treeRoot(40, read) }, [log]);
const text = L.parseNote(note).text;
const cosigned = note + (await w[0]!.cosign(text, 1_800_000_000)) + (await w[1]!.cosign(text, 1_800_000_000));
const inclusion = await L.proveInclusion(33, 40, read);
const proof = L.formatTlogProof({ index: 33, proof: inclusion, checkpoint: cosigned });
const onlyLog = L.formatTlogProof({ index: 33, proof: inclusion, checkpoint: note });
const pins = { logKeys: [log.verifierKey], witnessKeys: w.map((x) => x.verifierKey), requireCosignatures: 2 };

type Dev = Awaited<ReturnType<typeof createQuickJsDevice>>;
const outcome = (bytes: Uint8Array) => {
  const r = cborDecode(bytes) as any;
  return r.ok ? (r.result.valid === false ? r.result.error.code : 'ok') : r.error.code;
};

test('terminal on the verifier bundle: pin the log, then check receipts; the same bytes as on Node', async () => {
  const abi = createNodeAbi({ now: Date.parse('2027-01-01T00:00:00Z') });
  const qjs = await createQuickJsDevice(abi, { bundle: 'verify' });
  const node = createDevice(Verify, createNodeAbi({ now: Date.parse('2027-01-01T00:00:00Z') }));
  try {
    const changed = { ...receipt, amount: { amountMinor: '1251', currency: 'EUR' } };
    const requests: Array<[string, Record<string, unknown>]> = [
      ['verifyLogProof', { proof, receipt }],
      ['provisionLog', { logKeys: [w[0]!.verifierKey] }],
      ['provisionLog', { ...pins, requireCosignatures: 3 }],
      ['provisionLog', pins],
      ['provisionLog', { ...pins, logKeys: [log.verifierKey] }],
      ['provisionLog', { ...pins, requireCosignatures: 1 }],
      ['verifyLogProof', { proof, receipt }],
      ['verifyLogProof', { proof: L.utf8Encode(proof), receipt: JSON.stringify(receipt) }],
      ['verifyLogProof', { proof, entry: L.logEntry('receipt', receipt) }],
      ['verifyLogProof', { proof, receipt: changed }],
      ['verifyLogProof', { proof: onlyLog, receipt }],
      ['verifyLogProof', { proof: proof.replace('\n40\n', '\n41\n'), receipt }],
      ['verifyLogProof', { proof: 'c2sp.org/tlog-proof@v1\nindex x\n', receipt }],
      ['verifyLogProof', { proof: 7, receipt }],
      ['verifyLogProof', { proof, receipt: 'not json' }],
    ];
    const codes: string[] = [];
    for (const [i, [op, args]] of requests.entries()) {
      const payload = cborEncode({ id: i, op, args });
      const a = qjs.request(payload);
      const b = await handlePayload(node, payload);
      assert.ok(a.length === b.length && a.every((x, j) => x === b[j]), `${op} #${i}: bytes differ`);
      codes.push(outcome(a));
    }
    assert.equal(codes, [
      'not_provisioned',
      'bad_request', // a witness key where a log key belongs
      'bad_request', // three of two witnesses
      'ok',
      'ok', // the same pins again
      'already_provisioned',
      'ok',
      'ok',
      'ok',
      'log_proof_invalid',
      'checkpoint_cosignatures_insufficient',
      'checkpoint_signature_invalid',
      'malformed',
      'bad_request',
      'malformed',
    ]);
    const ok = cborDecode(qjs.request(cborEncode({ id: 99, op: 'verifyLogProof', args: { proof, receipt } }))) as any;
    assert.equal(ok.result, {
      valid: true,
      origin: ORIGIN,
      size: 40,
      index: 33,
      cosignedBy: ['w1.example', 'w2.example'],
    });
    // after a reboot (a new engine on the same flash) the pins are still there
    const again = await createQuickJsDevice(abi, { bundle: 'verify' });
    try {
      assert.is(outcome(again.request(cborEncode({ id: 1, op: 'verifyLogProof', args: { proof, receipt } }))), 'ok');
    } finally {
      again.dispose();
    }
  } finally {
    qjs.dispose();
  }
});

test('the wallet bundle has no log verifier: unknown_op', async () => {
  const qjs: Dev = await createQuickJsDevice(createNodeAbi(), { bundle: 'wallet' });
  try {
    assert.is(outcome(qjs.request(cborEncode({ id: 1, op: 'provisionLog', args: pins }))), 'unknown_op');
    assert.is(
      outcome(qjs.request(cborEncode({ id: 2, op: 'verifyLogProof', args: { proof, receipt } }))),
      'unknown_op',
    );
  } finally {
    qjs.dispose();
  }
});

test.run();
