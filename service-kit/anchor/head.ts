/**
 * What is anchored: a log's head as `(origin, size, root)`, the three lines that open a C2SP
 * checkpoint (origin line, tree size, root hash). Each service anchors its transparency log's
 * signed checkpoint (service-kit/tlog/); a service whose log is turned off anchors its audit hash
 * chain's head instead, in the same shape: its origin names the chain, its size is the last
 * entry's `seq`, its root is that entry's hash. The anchor's record says which it is
 * (`HeadSource`); the origins differ too (`…/ctl-gateway-log` against `…/ctl-gateway-audit`).
 *
 * On a Bitcoin-family chain the head is an OP_RETURN output of 76 bytes (standard: at most 80):
 * `"CTL" 0x01` ‖ SHA-256(origin) ‖ size (8 bytes, big-endian) ‖ root. On an EVM chain it is the
 * `Anchored` event of contracts/CtlAnchor.sol (the origin in clear, its keccak256 as a topic).
 */
import { createHash } from 'node:crypto';

export interface AnchorHead {
  /** The log's name, e.g. `authority.example.com/ctl-authority-audit` (1–255 printable characters). */
  origin: string;
  /** Entries in the log (a hash chain: the last `seq`). */
  size: number;
  /** 64 lowercase hex: the root hash (a hash chain: the head entry's hash). */
  root: string;
}

/**
 * What a head is the head of: `checkpoint`, a transparency log's signed checkpoint (checked with a
 * consistency proof, RFC 9162 §2.1.4), or `audit-head`, the audit hash chain's last entry (the
 * log turned off; checked against the service's audit chain).
 */
export type HeadSource = 'checkpoint' | 'audit-head';

/** Throws a RangeError naming the defect; returns the head as given. */
export function checkAnchorHead(h: AnchorHead): AnchorHead {
  if (typeof h?.origin !== 'string' || !/^[\x21-\x7e][\x20-\x7e]{0,254}$/.test(h.origin))
    throw new RangeError('origin: 1 to 255 printable ASCII characters, not starting with a space');
  if (!Number.isSafeInteger(h.size) || h.size < 0) throw new RangeError('size: a non-negative integer');
  if (typeof h.root !== 'string' || !/^[0-9a-f]{64}$/.test(h.root)) throw new RangeError('root: 64 lowercase hex');
  return h;
}

/** The head of a C2SP checkpoint's text (its first three lines; signatures are the log's business). */
export function headOfCheckpoint(text: string): AnchorHead {
  const lines = text.replace(/\r\n/g, '\n').split('\n');
  const [origin, size, root] = lines;
  if (origin === undefined || size === undefined || root === undefined)
    throw new RangeError('checkpoint: expected origin, size and root hash lines');
  if (!/^(0|[1-9][0-9]{0,15})$/.test(size)) throw new RangeError('checkpoint: the size line is not a number');
  const hash = Buffer.from(root, 'base64');
  if (hash.length !== 32 || hash.toString('base64') !== root)
    throw new RangeError('checkpoint: the root line is not 32 bytes of base64');
  return checkAnchorHead({ origin, size: Number(size), root: hash.toString('hex') });
}

export const BTC_ANCHOR_MAGIC = Buffer.from('43544c01', 'hex'); // "CTL" and format 1

export const originSha256 = (origin: string): Buffer => createHash('sha256').update(origin, 'utf8').digest();

/** The 76 bytes of the OP_RETURN output that anchors `h`. */
export function btcAnchorPayload(h: AnchorHead): Buffer {
  checkAnchorHead(h);
  const size = Buffer.alloc(8);
  size.writeBigUInt64BE(BigInt(h.size));
  return Buffer.concat([BTC_ANCHOR_MAGIC, originSha256(h.origin), size, Buffer.from(h.root, 'hex')]);
}

/** The anchor an OP_RETURN payload holds (the origin as its hash), or undefined when it is not one. */
export function parseBtcAnchorPayload(data: Buffer): { originHash: string; size: number; root: string } | undefined {
  if (data.length !== 76 || !data.subarray(0, 4).equals(BTC_ANCHOR_MAGIC)) return undefined;
  const size = data.readBigUInt64BE(36);
  if (size > BigInt(Number.MAX_SAFE_INTEGER)) return undefined;
  return {
    originHash: data.subarray(4, 36).toString('hex'),
    size: Number(size),
    root: data.subarray(44).toString('hex'),
  };
}

/** The data pushed by an OP_RETURN output's script (hex), or undefined when the script is not one. */
export function opReturnData(scriptHex: string): Buffer | undefined {
  const s = Buffer.from(scriptHex, 'hex');
  if (s.length < 2 || s[0] !== 0x6a) return undefined;
  const op = s[1]!;
  if (op >= 1 && op <= 75) return s.length === 2 + op ? s.subarray(2) : undefined;
  if (op === 0x4c && s.length >= 3) return s.length === 3 + s[2]! ? s.subarray(3) : undefined;
  return undefined;
}
