/**
 * SHA-256, SHA-512 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104) in plain JavaScript, for hosts with
 * neither node:crypto nor WebCrypto (QuickJS): what Ed25519 (SHA-512), key thumbprints and
 * policy hashes need there. Written for size, since it rides in every device bundle: the round
 * constants and initial values are not tables in the source but computed once, as FIPS 180-4
 * §4.2 and §5.3 define them (the fractional parts of the cube and square roots of the first
 * primes); SHA-256's are the high halves of SHA-512's. Checked against the FIPS / NIST vectors
 * (test/crypto/sha2.test.ts) and against node:crypto on random inputs.
 */

interface Constants {
  /** Round constants, 80 × 64 bits as high / low halves. */
  kh: Int32Array;
  kl: Int32Array;
  /** Initial hash values, 8 × 64 bits. */
  ih: Int32Array;
  il: Int32Array;
}
let constants: Constants | undefined;

/** floor(frac(p^(1/root)) · 2^64), by Newton's integer root. */
function rootFraction(p: number, root: number): bigint {
  const r = BigInt(root);
  const n = BigInt(p) << (64n * r);
  // Start just above the root: the float root is good to ~2^-50, so 2^20 units of 2^-64 above it
  // is above the true one, and Newton (which must start above) ends in two or three steps instead
  // of seven or so from a power of two: a device's first hash builds these tables (cold start).
  let x = (BigInt(Math.floor(p ** (1 / root) * 2 ** 52)) << 12n) + (1n << 20n);
  for (;;) {
    const y = ((r - 1n) * x + n / x ** (r - 1n)) / r;
    if (y >= x) return x & 0xffffffffffffffffn;
    x = y;
  }
}

function consts(): Constants {
  if (constants) return constants;
  const primes: number[] = [];
  for (let n = 2; primes.length < 80; n++) if (primes.every((p) => n % p)) primes.push(n);
  const c: Constants = { kh: new Int32Array(80), kl: new Int32Array(80), ih: new Int32Array(8), il: new Int32Array(8) };
  primes.forEach((p, i) => {
    const k = rootFraction(p, 3);
    c.kh[i] = Number(k >> 32n);
    c.kl[i] = Number(k & 0xffffffffn);
    if (i < 8) {
      const h = rootFraction(p, 2);
      c.ih[i] = Number(h >> 32n);
      c.il[i] = Number(h & 0xffffffffn);
    }
  });
  return (constants = c);
}

/** The message with FIPS 180-4 §5.1 padding, for blocks of `block` bytes. */
function padded(msg: Uint8Array, block: number): DataView {
  const total = Math.ceil((msg.length + 1 + block / 8) / block) * block;
  const buf = new Uint8Array(total);
  buf.set(msg);
  buf[msg.length] = 0x80;
  const v = new DataView(buf.buffer);
  const bits = msg.length * 8;
  v.setUint32(total - 8, Math.floor(bits / 2 ** 32));
  v.setUint32(total - 4, bits >>> 0);
  return v;
}

const rotr32 = (x: number, n: number) => (x >>> n) | (x << (32 - n));

/** SHA-256. @example hexEncode(sha256(utf8Encode('abc'))) // 'ba7816bf…' */
export function sha256(msg: Uint8Array): Uint8Array {
  const { kh, ih } = consts();
  const v = padded(msg, 64);
  const H = ih.slice();
  const w = new Int32Array(64);
  for (let off = 0; off < v.byteLength; off += 64) {
    for (let t = 0; t < 64; t++) {
      if (t < 16) w[t] = v.getInt32(off + 4 * t);
      else {
        const a = w[t - 15]!;
        const b = w[t - 2]!;
        w[t] =
          (rotr32(b, 17) ^ rotr32(b, 19) ^ (b >>> 10)) +
          w[t - 7]! +
          (rotr32(a, 7) ^ rotr32(a, 18) ^ (a >>> 3)) +
          w[t - 16]!;
      }
    }
    let [a, b, c, d, e, f, g, h] = H as unknown as number[];
    for (let t = 0; t < 64; t++) {
      const t1 =
        (h! + (rotr32(e!, 6) ^ rotr32(e!, 11) ^ rotr32(e!, 25)) + ((e! & f!) ^ (~e! & g!)) + kh[t]! + w[t]!) | 0;
      const t2 = ((rotr32(a!, 2) ^ rotr32(a!, 13) ^ rotr32(a!, 22)) + ((a! & b!) ^ (a! & c!) ^ (b! & c!))) | 0;
      h = g;
      g = f;
      f = e;
      e = (d! + t1) | 0;
      d = c;
      c = b;
      b = a;
      a = (t1 + t2) | 0;
    }
    [a, b, c, d, e, f, g, h].forEach((x, i) => (H[i] = (H[i]! + x!) | 0));
  }
  const out = new DataView(new ArrayBuffer(32));
  H.forEach((x, i) => out.setInt32(4 * i, x));
  return new Uint8Array(out.buffer);
}

const U = 2 ** 32;

/**
 * SHA-512. 64-bit words are (high, low) Int32 pairs, the rounds written out on locals: in QuickJS
 * a helper call or a typed-array shuffle per round costs more than the arithmetic.
 * @example sha512(new Uint8Array()).length // 64
 */
export function sha512(msg: Uint8Array): Uint8Array {
  const { kh, kl, ih, il } = consts();
  const v = padded(msg, 128);
  const H = new Int32Array(16);
  for (let i = 0; i < 8; i++) {
    H[2 * i] = ih[i]!;
    H[2 * i + 1] = il[i]!;
  }
  const wh = new Int32Array(80);
  const wl = new Int32Array(80);
  for (let off = 0; off < v.byteLength; off += 128) {
    for (let t = 0; t < 16; t++) {
      wh[t] = v.getInt32(off + 8 * t);
      wl[t] = v.getInt32(off + 8 * t + 4);
    }
    for (let t = 16; t < 80; t++) {
      // σ0 = rotr 1 ^ rotr 8 ^ shr 7 of W[t-15]; σ1 = rotr 19 ^ rotr 61 ^ shr 6 of W[t-2]
      let h = wh[t - 15]!;
      let l = wl[t - 15]!;
      const s0h = ((h >>> 1) | (l << 31)) ^ ((h >>> 8) | (l << 24)) ^ (h >>> 7);
      const s0l = ((l >>> 1) | (h << 31)) ^ ((l >>> 8) | (h << 24)) ^ ((l >>> 7) | (h << 25));
      h = wh[t - 2]!;
      l = wl[t - 2]!;
      const s1h = ((h >>> 19) | (l << 13)) ^ ((l >>> 29) | (h << 3)) ^ (h >>> 6);
      const s1l = ((l >>> 19) | (h << 13)) ^ ((h >>> 29) | (l << 3)) ^ ((l >>> 6) | (h << 26));
      const lo = (s0l >>> 0) + (s1l >>> 0) + (wl[t - 7]! >>> 0) + (wl[t - 16]! >>> 0);
      wh[t] = s0h + s1h + wh[t - 7]! + wh[t - 16]! + ((lo / U) | 0);
      wl[t] = lo;
    }
    let [ah, al, bh, bl, ch, cl, dh, dl, eh, el, fh, fl, gh, gl, hh, hl] = H as unknown as number[] as [
      number,
      number,
      number,
      number,
      number,
      number,
      number,
      number,
      number,
      number,
      number,
      number,
      number,
      number,
      number,
      number,
    ];
    for (let t = 0; t < 80; t++) {
      // T1 = h + Σ1(e) + Ch(e, f, g) + K[t] + W[t], Σ1 = rotr 14 ^ rotr 18 ^ rotr 41
      const S1h = ((eh >>> 14) | (el << 18)) ^ ((eh >>> 18) | (el << 14)) ^ ((el >>> 9) | (eh << 23));
      const S1l = ((el >>> 14) | (eh << 18)) ^ ((el >>> 18) | (eh << 14)) ^ ((eh >>> 9) | (el << 23));
      let lo = (hl >>> 0) + (S1l >>> 0) + (((el & fl) ^ (~el & gl)) >>> 0) + (kl[t]! >>> 0) + (wl[t]! >>> 0);
      const t1h = hh + S1h + ((eh & fh) ^ (~eh & gh)) + kh[t]! + wh[t]! + ((lo / U) | 0);
      const t1l = lo | 0;
      // T2 = Σ0(a) + Maj(a, b, c), Σ0 = rotr 28 ^ rotr 34 ^ rotr 39
      const S0h = ((ah >>> 28) | (al << 4)) ^ ((al >>> 2) | (ah << 30)) ^ ((al >>> 7) | (ah << 25));
      const S0l = ((al >>> 28) | (ah << 4)) ^ ((ah >>> 2) | (al << 30)) ^ ((ah >>> 7) | (al << 25));
      hh = gh;
      hl = gl;
      gh = fh;
      gl = fl;
      fh = eh;
      fl = el;
      lo = (dl >>> 0) + (t1l >>> 0);
      eh = (dh + t1h + ((lo / U) | 0)) | 0;
      el = lo | 0;
      dh = ch;
      dl = cl;
      lo = (t1l >>> 0) + (S0l >>> 0) + (((al & bl) ^ (al & cl) ^ (bl & cl)) >>> 0);
      const nh = (t1h + S0h + ((ah & bh) ^ (ah & ch) ^ (bh & ch)) + ((lo / U) | 0)) | 0;
      ch = bh;
      cl = bl;
      bh = ah;
      bl = al;
      ah = nh;
      al = lo | 0;
    }
    [ah, al, bh, bl, ch, cl, dh, dl, eh, el, fh, fl, gh, gl, hh, hl].forEach((x, i) => {
      if (i & 1) {
        const lo = (H[i]! >>> 0) + (x >>> 0);
        H[i - 1] = H[i - 1]! + ((lo / U) | 0);
        H[i] = lo;
      } else H[i] = H[i]! + x;
    });
  }
  const out = new DataView(new ArrayBuffer(64));
  H.forEach((x, i) => out.setInt32(4 * i, x));
  return new Uint8Array(out.buffer);
}

/** HMAC-SHA-256 (RFC 2104). @example hmacSha256(key, data).length // 32 */
export function hmacSha256(key: Uint8Array, data: Uint8Array): Uint8Array {
  const k = new Uint8Array(64);
  k.set(key.length > 64 ? sha256(key) : key);
  const pad = (x: number) => {
    const b = new Uint8Array(64);
    for (let i = 0; i < 64; i++) b[i] = k[i]! ^ x;
    return b;
  };
  const inner = new Uint8Array(64 + data.length);
  inner.set(pad(0x36));
  inner.set(data, 64);
  const outer = new Uint8Array(96);
  outer.set(pad(0x5c));
  outer.set(sha256(inner), 64);
  return sha256(outer);
}
