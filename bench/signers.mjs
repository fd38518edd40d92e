#!/usr/bin/env node
// Signatures a second by the services' signers (service-kit/signers): the file signer (PEM in
// memory, node:crypto Ed25519) as the baseline, and the PKCS#11 signer against SoftHSM2
// (CKM_EDDSA through pkcs11js), one signature at a time and 16 in flight (its session pool of 4),
// each as a ratio of the file signer measured in the same run. A bare synchronous pkcs11js
// C_SignInit + C_Sign loop shows what the token itself costs, apart from our pool and promises.
// SoftHSM is software in this process; a network HSM adds its round trip to every signature.
//
//   npm run compile && node bench/signers.mjs [--seconds 2] [--rounds 3]
//
// Makes its own token in a temporary directory (SOFTHSM2_CONF), removed at exit.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const seconds = arg('seconds', 2);
const rounds = arg('rounds', 3);
const modulePath = process.env.CTL_PKCS11_MODULE || '/usr/lib/softhsm/libsofthsm2.so';

const dir = mkdtempSync(join(tmpdir(), 'ctl-bench-hsm-'));
mkdirSync(join(dir, 'tokens'));
writeFileSync(
  join(dir, 'softhsm2.conf'),
  `directories.tokendir = ${join(dir, 'tokens')}\nobjectstore.backend = file\nlog.level = ERROR\n`,
);
process.env.SOFTHSM2_CONF = join(dir, 'softhsm2.conf');
execFileSync('softhsm2-util', ['--init-token', '--free', '--label', 'bench', '--so-pin', '0000', '--pin', '1234'], {
  stdio: 'pipe',
});

const build = new URL('../build/', import.meta.url);
const { pemSigner, generatePkcs11Ed25519Key, closePkcs11Modules } = await import(
  new URL('service-kit/signers/index.js', build).href
);
const { generateKeyPair } = await import(new URL('src/index.js', build).href);

const uri = 'pkcs11:token=bench;object=bench-key?pin-value=1234';
const hsm = await generatePkcs11Ed25519Key(uri, { modulePath });
const file = await pemSigner((await generateKeyPair({ alg: 'EdDSA' })).privateKeyPem, 'bench');
const msg = new TextEncoder().encode('ctl-receipt/1\n' + 'x'.repeat(600)); // about a receipt's size

/** Signatures a second with `inFlight` concurrent callers for `seconds`. */
async function rate(signer, inFlight) {
  const end = performance.now() + seconds * 1000;
  let n = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (performance.now() < end) {
        await signer.sign(msg);
        n++;
      }
    }),
  );
  return n / seconds;
}

// The token alone: synchronous pkcs11js calls on one session, no pool, no promises.
const lib = createRequire(import.meta.url)('pkcs11js');
const p = new lib.PKCS11();
p.load(modulePath);
try {
  p.C_Initialize({ flags: lib.CKF_OS_LOCKING_OK });
} catch {
  /* initialised by the signer */
}
const slot = p.C_GetSlotList(true).find((s) => p.C_GetTokenInfo(s).label.trim() === 'bench');
const session = p.C_OpenSession(slot, lib.CKF_SERIAL_SESSION);
p.C_FindObjectsInit(session, [
  { type: lib.CKA_CLASS, value: lib.CKO_PRIVATE_KEY },
  { type: lib.CKA_LABEL, value: 'bench-key' },
]);
const [key] = p.C_FindObjects(session, 1);
p.C_FindObjectsFinal(session);
const bare = {
  async sign(m) {
    p.C_SignInit(session, { mechanism: 0x1057 }, key);
    return p.C_Sign(session, Buffer.from(m), Buffer.alloc(64));
  },
};

// Warm-up: first calls compile and import (the first file signature costs milliseconds).
for (const s of [file, hsm, bare]) for (let i = 0; i < 200; i++) await s.sign(msg);

const rows = [];
for (let r = 0; r < rounds; r++) {
  const base = await rate(file, 1);
  const base16 = await rate(file, 16);
  const h1 = await rate(hsm, 1);
  const h16 = await rate(hsm, 16);
  const raw = await rate(bare, 1);
  rows.push({ base, base16, h1, h16, raw });
}
const fmt = (x) => x.toFixed(2);
const per = (x) => Math.round(x).toLocaleString('en');
console.log(
  `signatures a second (${seconds} s each, ${rounds} rounds; ratios against the file signer of the same round)`,
);
console.log('round | file signer | PKCS#11, 1 in flight | PKCS#11, 16 in flight | bare pkcs11js C_Sign');
rows.forEach((x, i) =>
  console.log(
    `${i + 1}     | ${per(x.base)} | ${per(x.h1)} (${fmt(x.h1 / x.base)}) | ${per(x.h16)} ` +
      `(${fmt(x.h16 / x.base16)} of file at 16) | ${per(x.raw)} (${fmt(x.raw / x.base)})`,
  ),
);

await hsm.close();
p.C_CloseSession(session);
closePkcs11Modules();
rmSync(dir, { recursive: true, force: true });
