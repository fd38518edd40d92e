/**
 * A from-scratch reference for the transparency-log tests, written from RFC 9162 and the C2SP
 * texts without the service's code (service-kit/tlog): the Merkle tree hash and proofs computed
 * over the whole list of leaves by the RFC's recursive definitions, the RFC's proof verification
 * algorithms, tlog-tiles tiles computed level by level, and signed-note and cosignature checks
 * straight over node:crypto.
 */
import { createHash, createPublicKey, verify } from 'node:crypto';

const sha = (...parts: Uint8Array[]) => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest();
};
export const refLeafHash = (entry: Uint8Array) => sha(Buffer.of(0), entry);
const node = (l: Uint8Array, r: Uint8Array) => sha(Buffer.of(1), l, r);
const k = (n: number) => {
  let x = 1;
  while (x * 2 < n) x *= 2;
  return x;
};

/** RFC 9162 §2.1.1 MTH over leaf hashes. */
export function refRoot(leaves: Buffer[]): Buffer {
  if (leaves.length === 0) return sha();
  if (leaves.length === 1) return leaves[0]!;
  const s = k(leaves.length);
  return node(refRoot(leaves.slice(0, s)), refRoot(leaves.slice(s)));
}

/** RFC 9162 §2.1.3.1 PATH(m, D[n]) over leaf hashes. */
export function refPath(m: number, leaves: Buffer[]): Buffer[] {
  if (leaves.length <= 1) return [];
  const s = k(leaves.length);
  return m < s
    ? [...refPath(m, leaves.slice(0, s)), refRoot(leaves.slice(s))]
    : [...refPath(m - s, leaves.slice(s)), refRoot(leaves.slice(0, s))];
}

/** RFC 9162 §2.1.4.1 PROOF(m, D[n]). */
export function refConsistency(m: number, leaves: Buffer[]): Buffer[] {
  const sub = (m: number, d: Buffer[], b: boolean): Buffer[] => {
    if (m === d.length) return b ? [] : [refRoot(d)];
    const s = k(d.length);
    return m <= s
      ? [...sub(m, d.slice(0, s), b), refRoot(d.slice(s))]
      : [...sub(m - s, d.slice(s), false), refRoot(d.slice(0, s))];
  };
  return m === 0 || m === leaves.length ? [] : sub(m, leaves, true);
}

/** RFC 9162 §2.1.3.2: verifying an inclusion proof. */
export function refVerifyInclusion(index: number, size: number, leaf: Buffer, proof: Buffer[], root: Buffer): boolean {
  if (index >= size) return false;
  let fn = index;
  let sn = size - 1;
  let r = leaf;
  for (const p of proof) {
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      r = node(p, r);
      if (fn % 2 === 0) while (fn % 2 === 0 && fn !== 0) [fn, sn] = [Math.floor(fn / 2), Math.floor(sn / 2)];
    } else r = node(r, p);
    [fn, sn] = [Math.floor(fn / 2), Math.floor(sn / 2)];
  }
  return sn === 0 && r.equals(root);
}

/** C2SP tlog-tiles: every tile of a tree of these leaf hashes, `level/n[.p/w]` → bytes. */
export function refTiles(leaves: Buffer[]): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  let level = 0;
  let nodes = leaves;
  while (nodes.length > 0) {
    const up: Buffer[] = [];
    for (let n = 0; n * 256 < nodes.length; n++) {
      const chunk = nodes.slice(n * 256, n * 256 + 256);
      out.set(`${level}/${n}${chunk.length < 256 ? `.p/${chunk.length}` : ''}`, Buffer.concat(chunk));
      if (chunk.length === 256) up.push(refRoot(chunk));
    }
    nodes = up;
    level++;
  }
  return out;
}

/** The tlog-tiles path of a tile index: 1234067 → x001/x234/067. */
export function refTileIndex(n: number): string {
  const s = String(n).padStart(Math.ceil(String(n).length / 3) * 3, '0');
  const groups = s.match(/.{3}/g)!;
  return groups.map((g, i) => (i < groups.length - 1 ? `x${g}` : g)).join('/');
}

function vkeyParts(vkey: string) {
  const [name, id, key] = [vkey.split('+')[0]!, vkey.split('+')[1]!, vkey.split('+').slice(2).join('+')];
  const raw = Buffer.from(key, 'base64');
  const pub = createPublicKey({
    key: Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), raw.subarray(1)]),
    format: 'der',
    type: 'spki',
  });
  return { name, id: Buffer.from(id, 'hex'), type: raw[0], pub };
}

/** A checkpoint note signed by `vkey` (Ed25519 note signature): its origin, size and root; throws otherwise. */
export function refOpenCheckpoint(
  note: string,
  vkey: string,
): { origin: string; size: number; root: Buffer; text: string } {
  const v = vkeyParts(vkey);
  const [text, sigs] = [note.slice(0, note.indexOf('\n\n') + 1), note.slice(note.indexOf('\n\n') + 2)];
  const ok = sigs
    .split('\n')
    .filter(Boolean)
    .some((line) => {
      const [dash, name, b64] = line.split(' ');
      const sig = Buffer.from(b64 ?? '', 'base64');
      return (
        dash === '\u2014' &&
        name === v.name &&
        sig.subarray(0, 4).equals(v.id) &&
        verify(null, Buffer.from(text), v.pub, sig.subarray(4))
      );
    });
  if (!ok) throw new Error(`no valid signature by ${v.name}`);
  const [origin, size, root] = text.split('\n');
  return { origin: origin!, size: Number(size), root: Buffer.from(root!, 'base64'), text };
}

/** Whether `note` carries a valid cosignature/v1 by the witness of `vkey` (type 0x04). */
export function refHasCosignature(note: string, vkey: string): boolean {
  const v = vkeyParts(vkey);
  const text = note.slice(0, note.indexOf('\n\n') + 1);
  return note
    .slice(note.indexOf('\n\n') + 2)
    .split('\n')
    .filter(Boolean)
    .some((line) => {
      const [, name, b64] = line.split(' ');
      const sig = Buffer.from(b64 ?? '', 'base64');
      if (name !== v.name || v.type !== 4 || sig.length !== 76 || !sig.subarray(0, 4).equals(v.id)) return false;
      const time = sig.readBigUInt64BE(4);
      return verify(null, Buffer.from(`cosignature/v1\ntime ${time}\n${text}`), v.pub, sig.subarray(12));
    });
}
