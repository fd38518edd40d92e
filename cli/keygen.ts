/**
 * `ctl keygen`: a signing key pair for a wallet, an authority or a device (PROTOCOL.md §3:
 * Ed25519 or P-256). The private half is written 0600; the kid is the RFC 7638 thumbprint.
 */
import { generateKeyPair, jwkThumbprint } from '../src/index.js';
import { guard, one, parseArgs, writeAtomic } from './device/args.js';
import { existsSync } from 'node:fs';

const USAGE = `usage: ctl keygen [--alg EdDSA|ES256] [--out PREFIX] [--force]

  --alg    EdDSA (Ed25519, default) or ES256 (P-256)
  --out    write PREFIX.key.pem (private, mode 0600) and PREFIX.pub.pem; without it the key pair
           is printed as JSON on stdout
  --force  overwrite existing files`;

export async function main(args: string[]): Promise<number> {
  return guard(USAGE, async () => {
    if (args.includes('--help') || args.includes('-h')) return void console.log(USAGE);
    const p = parseArgs(args, { values: ['alg', 'out'], flags: ['force'] });
    if (p.positionals.length) return (void console.error(USAGE), 2);
    const alg = one(p, 'alg') ?? 'EdDSA';
    if (alg !== 'EdDSA' && alg !== 'ES256') return (void console.error(`--alg must be EdDSA or ES256\n\n${USAGE}`), 2);
    const pair = await generateKeyPair({ alg });
    const kid = await jwkThumbprint(pair.publicJwk);
    const out = one(p, 'out');
    if (!out) {
      console.log(
        JSON.stringify(
          { alg, kid, publicJwk: pair.publicJwk, publicKeyPem: pair.publicKeyPem, privateKeyPem: pair.privateKeyPem },
          null,
          2,
        ),
      );
      return 0;
    }
    const [keyFile, pubFile] = [`${out}.key.pem`, `${out}.pub.pem`];
    if (!p.flags.has('force') && (existsSync(keyFile) || existsSync(pubFile))) {
      console.error(`ctl keygen: ${keyFile} or ${pubFile} exists; pass --force to overwrite`);
      return 1;
    }
    writeAtomic(keyFile, pair.privateKeyPem, 0o600);
    writeAtomic(pubFile, pair.publicKeyPem);
    console.log(
      JSON.stringify({ alg, kid, publicJwk: pair.publicJwk, privateKey: keyFile, publicKey: pubFile }, null, 2),
    );
    return 0;
  });
}
