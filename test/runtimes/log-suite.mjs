/**
 * The log's portable suite (ARCHITECTURE.md rule 10): one set of checks written as a function of
 * a library that has the log's verifying half, run unchanged against `ctl/log`, `ctl/verify` and
 * `ctl` on every target (test/runtimes/log-runtimes.test.ts): the sources on Node, the ESM and
 * CJS builds on Node, Bun and Deno, the IIFEs in QuickJS and a bare `vm`.
 *
 *   const out = await run(LIB, report, fixtures)   // out = { passed, failed, outcomes }
 *
 * `fixtures`: Merkle probes over 300 entries, reference proofs and their mutants (bytes as arrays of
 * numbers, so no decoder is needed), checkpoints and tlog-proofs signed by the driver with their expected codes, and a
 * receipt logged as `logEntry('receipt', receipt)`. Plain ES2020, no imports, no host objects;
 * evaluated as a classic script in QuickJS with its one `export` removed.
 */
export async function run(LIB, report, fixtures) {
  const outcomes = [];
  let passed = 0;
  let failed = 0;
  const check = (name, ok, outcome) => {
    outcomes.push([name, outcome]);
    if (ok) passed++;
    else failed++;
    report(name, ok, outcome);
  };
  const attempt = async (name, f) => {
    try {
      await f();
    } catch (e) {
      check(name, false, 'threw ' + String(e && e.stack ? e.stack : e));
    }
  };
  const bytes = (a) => new Uint8Array(a);
  const verdict = (r) => (r.valid ? 'valid' : r.error.code);

  // 1. RFC 9162 proofs: every reference proof and its mutants.
  for (const p of fixtures.inclusion) {
    await attempt('inclusion ' + p.name, async () => {
      const r = LIB.verifyInclusion(bytes(p.leafHash), p.index, p.size, p.proof.map(bytes), bytes(p.root));
      check('inclusion ' + p.name, verdict(r) === p.expected, verdict(r));
    });
  }
  for (const p of fixtures.consistency) {
    await attempt('consistency ' + p.name, async () => {
      const r = LIB.verifyConsistency(p.size1, p.size2, p.proof.map(bytes), bytes(p.root1), bytes(p.root2));
      check('consistency ' + p.name, verdict(r) === p.expected, verdict(r));
    });
  }
  // 2. Checkpoints: log signature, origin, k witness cosignatures.
  for (const c of fixtures.checkpoints) {
    await attempt('checkpoint ' + c.name, async () => {
      const r = await LIB.verifyCheckpoint(c.note, c.logKeys, c.options);
      const got = r.valid ? 'valid ' + r.checkpoint.size + ' ' + r.cosignatures.length : r.error.code;
      check('checkpoint ' + c.name, got === c.expected, got);
    });
  }
  // 3. tlog-proofs of logged entries (bytes), and of a receipt rebuilt from its JSON.
  for (const c of fixtures.tlogProofs) {
    await attempt('tlog-proof ' + c.name, async () => {
      const r = await LIB.verifyTlogProof(c.proof, bytes(c.entry), c.logKeys, c.options);
      check('tlog-proof ' + c.name, verdict(r) === c.expected, verdict(r));
    });
  }
  await attempt('a receipt is in the log: logEntry(receipt) under the tlog-proof', async () => {
    const rc = fixtures.receipt;
    const ok = await LIB.verifyTlogProof(rc.proof, LIB.logEntry('receipt', rc.receipt), rc.logKeys, rc.options);
    const changed = JSON.parse(JSON.stringify(rc.receipt));
    changed.amount.amountMinor = String(Number(changed.amount.amountMinor) + 1);
    const bad = await LIB.verifyTlogProof(rc.proof, LIB.logEntry('receipt', changed), rc.logKeys, rc.options);
    const got = verdict(ok) + ' / ' + verdict(bad);
    check('a receipt is in the log', got === 'valid / log_proof_invalid', got);
  });
  // 4. Two checkpoints: extension, rollback, split view.
  await attempt('checkpoint consistency', async () => {
    const k = fixtures.consistencyPair;
    const a = await LIB.verifyCheckpoint(k.older, k.logKeys);
    const b = await LIB.verifyCheckpoint(k.newer, k.logKeys);
    const fork = await LIB.verifyCheckpoint(k.fork, k.logKeys);
    const proof = k.proof.map(bytes);
    const got = [
      verdict(LIB.verifyCheckpointConsistency(a.checkpoint, b.checkpoint, proof)),
      verdict(LIB.verifyCheckpointConsistency(b.checkpoint, a.checkpoint, proof)),
      verdict(LIB.verifyCheckpointConsistency(b.checkpoint, fork.checkpoint, [])),
    ].join(' ');
    check('checkpoint consistency', got === 'valid log_inconsistent log_inconsistent', got);
  });
  // 5. Hostile input answers, never throws.
  await attempt('hostile input is refused, not thrown', async () => {
    const r = [
      await LIB.verifyCheckpoint(null, null, null),
      await LIB.verifyTlogProof('c2sp.org/tlog-proof@v1\nindex 1\n\n\u0000', null, []),
      LIB.verifyInclusion(null, -1, 'x', null, {}),
      LIB.verifyConsistency(1, 0, [new Uint8Array(3)], null, null),
    ].map(verdict);
    check(
      'hostile input is refused, not thrown',
      r.every((c) => c !== 'valid'),
      r.join(' '),
    );
  });
  return { passed, failed, outcomes };
}
