/*
 * A stand-in firmware: speaks the bridge's framed protocol
 * (firmware-bridge/README.md § Frames) to the bridge running as a child process on a pipe, as
 * it would over a UART. It provisions the root key, installs a Trust Bundle (compact CBOR),
 * asks for a verification (compact SBA) and reads the answer; then sends hostile frames and
 * checks that each gets an error frame while the bridge keeps serving.
 *
 *   firmware ROOT.pem BUNDLE.cbor SBA.cbor AMOUNT CURRENCY -- bridge-command [args...]
 *
 * It only verifies, so its bridge runs the verifier bundle alone (`--bundle verify`).
 *
 * Prints one line per step ("step <name> ok|FAIL ...") and exits 0 only if every step went as
 * expected. Only libc: a device has no more. Everything it allocates is freed on every way out
 * of main (CI runs it under LeakSanitizer); exit() from a helper leaves only file-scope buffers.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- a minimal deterministic CBOR writer (RFC 8949 §4.2.1: shortest heads, sorted keys) ---- */

typedef struct { uint8_t *p; size_t len, cap; } buf_t;

static void put(buf_t *b, const void *src, size_t n) {
  if (n > b->cap - b->len) {
    if (n > (SIZE_MAX - 64) / 2 - b->len) { fprintf(stderr, "buffer too large\n"); exit(3); }
    b->cap = (b->len + n) * 2 + 64;
    b->p = realloc(b->p, b->cap);
    if (!b->p) { perror("realloc"); exit(3); }
  }
  memcpy(b->p + b->len, src, n);
  b->len += n;
}

static void head(buf_t *b, int major, uint64_t n) {
  uint8_t h[9];
  int k;
  if (n < 24) { h[0] = (uint8_t)(major << 5 | n); k = 1; }
  else if (n <= 0xff) { h[0] = (uint8_t)(major << 5 | 24); h[1] = (uint8_t)n; k = 2; }
  else if (n <= 0xffff) { h[0] = (uint8_t)(major << 5 | 25); h[1] = n >> 8; h[2] = n & 0xff; k = 3; }
  else if (n <= 0xffffffffu) { h[0] = (uint8_t)(major << 5 | 26); for (int i = 0; i < 4; i++) h[1 + i] = (uint8_t)(n >> (24 - 8 * i)); k = 5; }
  else { h[0] = (uint8_t)(major << 5 | 27); for (int i = 0; i < 8; i++) h[1 + i] = (uint8_t)(n >> (56 - 8 * i)); k = 9; }
  put(b, h, (size_t)k);
}
static void text(buf_t *b, const char *s) { head(b, 3, strlen(s)); put(b, s, strlen(s)); }
static void bytes(buf_t *b, const uint8_t *p, size_t n) { head(b, 2, n); put(b, p, n); }

/* Keys below are written in deterministic order by hand: shorter first, then bytewise. */

/* ---- a minimal CBOR reader: enough to walk a response and pick out members ----
 * Lengths and counts come from the peer and may be anything up to 2^64-1: a bounds check never
 * adds one to a position (`at + n > len` wraps around); it compares with what is left
 * (`n > len - at`, with at <= len always). */

typedef struct { const uint8_t *p; size_t len, at; int bad; } rd_t;

static uint64_t rd_head(rd_t *r, int *major, int *info) {
  if (r->at >= r->len) { r->bad = 1; return 0; }
  uint8_t b = r->p[r->at++];
  *major = b >> 5; *info = b & 31;
  if (*info < 24) return (uint64_t)*info;
  int n = *info == 24 ? 1 : *info == 25 ? 2 : *info == 26 ? 4 : *info == 27 ? 8 : -1;
  if (n < 0 || (size_t)n > r->len - r->at) { r->bad = 1; return 0; }
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v = v << 8 | r->p[r->at++];
  return v;
}

static void rd_skip(rd_t *r, int depth) {
  int major, info;
  if (depth > 32) { r->bad = 1; return; }
  uint64_t n = rd_head(r, &major, &info);
  if (r->bad) return;
  switch (major) {
    case 0: case 1: case 7: return;
    case 2: case 3: if (n > r->len - r->at) r->bad = 1; else r->at += (size_t)n; return;
    case 4: for (uint64_t i = 0; i < n && !r->bad; i++) rd_skip(r, depth + 1); return;
    case 5: for (uint64_t i = 0; i < n && !r->bad; i++) { rd_skip(r, depth + 1); if (!r->bad) rd_skip(r, depth + 1); } return; /* not 2*n: it wraps */
    default: r->bad = 1; return; /* tags never appear in responses */
  }
}

/* Finds `key` in the map at the reader's position; leaves the reader on its value. */
static int rd_find(rd_t *r, const char *key) {
  int major, info;
  uint64_t n = rd_head(r, &major, &info);
  if (r->bad || major != 5) return 0;
  for (uint64_t i = 0; i < n; i++) {
    uint64_t kl = rd_head(r, &major, &info);
    if (r->bad || major != 3 || kl > r->len - r->at) return 0;
    int match = kl == strlen(key) && memcmp(r->p + r->at, key, kl) == 0;
    r->at += (size_t)kl;
    if (match) return 1;
    rd_skip(r, 0);
    if (r->bad) return 0;
  }
  return 0;
}

/* Member path lookups on a response payload. */
static int get_bool(const uint8_t *p, size_t len, const char *k1, const char *k2, int *out) {
  rd_t r = { p, len, 0, 0 };
  if (!rd_find(&r, k1)) return 0;
  if (k2 && !rd_find(&r, k2)) return 0;
  if (r.at >= len) return 0;
  uint8_t v = p[r.at];
  if (v != 0xf4 && v != 0xf5) return 0;
  *out = v == 0xf5;
  return 1;
}

static int get_text(const uint8_t *p, size_t len, const char *k1, const char *k2, const char *k3, char *out, size_t cap) {
  rd_t r = { p, len, 0, 0 };
  if (!rd_find(&r, k1)) return 0;
  if (k2 && !rd_find(&r, k2)) return 0;
  if (k3 && !rd_find(&r, k3)) return 0;
  int major, info;
  uint64_t n = rd_head(&r, &major, &info);
  if (r.bad || major != 3 || r.at > len || n > len - r.at || n >= cap) return 0;
  memcpy(out, p + r.at, n);
  out[n] = 0;
  return 1;
}

/* ---- the link to the bridge ---- */

static int to_bridge = -1, from_bridge = -1;

static int write_all(int fd, const uint8_t *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0) { if (errno == EINTR) continue; return -1; }
    p += w; n -= (size_t)w;
  }
  return 0;
}

static int read_all(int fd, uint8_t *p, size_t n) {
  while (n) {
    ssize_t r = read(fd, p, n);
    if (r < 0) { if (errno == EINTR) continue; return -1; }
    if (r == 0) return -1;
    p += r; n -= (size_t)r;
  }
  return 0;
}

static int send_frame(const uint8_t *payload, size_t n) {
  uint8_t len[4] = { (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n };
  return write_all(to_bridge, len, 4) || write_all(to_bridge, payload, n);
}

/* Reads one response frame; caller frees. */
static uint8_t *recv_frame(size_t *n) {
  uint8_t len[4];
  if (read_all(from_bridge, len, 4)) return NULL;
  *n = (size_t)len[0] << 24 | (size_t)len[1] << 16 | (size_t)len[2] << 8 | len[3];
  if (*n > (1u << 24)) return NULL;
  uint8_t *p = malloc(*n ? *n : 1);
  if (!p || read_all(from_bridge, p, *n)) { free(p); return NULL; }
  return p;
}

static uint8_t *read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) { perror(path); exit(3); }
  fseek(f, 0, SEEK_END);
  long sz = ftell(f);
  if (sz < 0) { perror(path); exit(3); }
  fseek(f, 0, SEEK_SET);
  uint8_t *p = malloc((size_t)sz + 1);
  if (!p || fread(p, 1, (size_t)sz, f) != (size_t)sz) { perror(path); exit(3); }
  p[sz] = 0;
  fclose(f);
  *n = (size_t)sz;
  return p;
}

/* The inputs and the request buffer live at file scope, so one function frees them on every exit. */
static uint8_t *pem, *bundle, *sba;
static buf_t b;

static int finish(int rc) {
  free(b.p); free(pem); free(bundle); free(sba);
  b.p = pem = bundle = sba = NULL;
  return rc;
}

static int failures = 0;
static void report(const char *step, int ok, const char *detail) {
  printf("step %s %s%s%s\n", step, ok ? "ok" : "FAIL", detail && *detail ? " " : "", detail ? detail : "");
  fflush(stdout);
  if (!ok) failures++;
}

/* Sends a request, reads the response; returns 1 if `ok` is true. Fills code with error.code (or result.error.code). */
static int call(buf_t *req, uint8_t **resp, size_t *resp_len) {
  if (send_frame(req->p, req->len)) { fprintf(stderr, "write to bridge failed\n"); exit(4); }
  *resp = recv_frame(resp_len);
  if (!*resp) { fprintf(stderr, "bridge closed the link\n"); exit(4); }
  int ok = 0;
  return get_bool(*resp, *resp_len, "ok", NULL, &ok) && ok;
}

int main(int argc, char **argv) {
  int sep = 0;
  for (int i = 1; i < argc; i++) if (strcmp(argv[i], "--") == 0) { sep = i; break; }
  if (argc < 8 || sep != 6 || sep + 1 >= argc) {
    fprintf(stderr, "usage: firmware ROOT.pem BUNDLE.cbor SBA.cbor AMOUNT CURRENCY -- bridge-command [args...]\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  int in[2], out[2];
  if (pipe(in) || pipe(out)) { perror("pipe"); return 3; }
  pid_t pid = fork();
  if (pid < 0) { perror("fork"); return 3; }
  if (pid == 0) {
    dup2(in[0], 0); dup2(out[1], 1);
    close(in[0]); close(in[1]); close(out[0]); close(out[1]);
    execvp(argv[sep + 1], argv + sep + 1);
    perror("execvp");
    _exit(127);
  }
  close(in[0]); close(out[1]);
  to_bridge = in[1]; from_bridge = out[0];

  size_t pem_len, bundle_len, sba_len, n;
  pem = read_file(argv[1], &pem_len);
  bundle = read_file(argv[2], &bundle_len);
  sba = read_file(argv[3], &sba_len);
  const char *amount = argv[4], *currency = argv[5];
  uint8_t *resp;
  char code[128], detail[256];

  /* 1. provision the root key: {"id":1,"op":"provisionRoot","args":{"rootPublicKeyPem":…}} */
  head(&b, 5, 3);
  text(&b, "id"); head(&b, 0, 1);
  text(&b, "op"); text(&b, "provisionRoot");
  text(&b, "args"); head(&b, 5, 1); text(&b, "rootPublicKeyPem"); text(&b, (const char *)pem);
  report("provision", call(&b, &resp, &n), "");
  free(resp);

  /* 2. install the bundle, sent as compact CBOR bytes */
  b.len = 0;
  head(&b, 5, 3);
  text(&b, "id"); head(&b, 0, 2);
  text(&b, "op"); text(&b, "installBundle");
  text(&b, "args"); head(&b, 5, 1); text(&b, "bundle"); bytes(&b, bundle, bundle_len);
  int ok = call(&b, &resp, &n);
  code[0] = 0;
  get_text(resp, n, "error", "code", NULL, code, sizeof code);
  report("install-bundle", ok, code);
  free(resp);

  /* 3. verify the SBA (compact) for this payment; keys sorted: sba(3) < amount(6) < currency(8) */
  for (int round = 0; round < 2; round++) {
    b.len = 0;
    head(&b, 5, 3);
    text(&b, "id"); head(&b, 0, 3 + (uint64_t)round);
    text(&b, "op"); text(&b, "verify");
    text(&b, "args"); head(&b, 5, 3);
    text(&b, "sba"); bytes(&b, sba, sba_len);
    text(&b, "amount"); text(&b, amount);
    text(&b, "currency"); text(&b, currency);
    ok = call(&b, &resp, &n);
    int valid = 0;
    code[0] = 0;
    int have = get_bool(resp, n, "result", "valid", &valid);
    get_text(resp, n, "result", "error", "code", code, sizeof code);
    snprintf(detail, sizeof detail, "valid=%s%s%s", have ? (valid ? "true" : "false") : "?", code[0] ? " code=" : "", code);
    /* The first presentation is accepted; the same SBA again is a replay (PROTOCOL.md §7). */
    report(round == 0 ? "verify" : "verify-replay", ok && have && (round == 0 ? valid : (!valid && strcmp(code, "replay") == 0)), detail);
    free(resp);
  }

  /* 4. hostile frames: garbage payload, a non-canonical map, an unknown op, a zero-length frame, an oversized frame */
#define RAW(x) (const uint8_t *)(x), sizeof(x) - 1
  struct { const char *name; const uint8_t *p; size_t n; const char *expect; } bad[] = {
    { "garbage", RAW("\xff\xfe\x00\x13\x37"), "bad_frame" },
    { "non-canonical", RAW("\xa2\x62op\x66status\x62id\x01"), "bad_frame" }, /* op before id: unsorted keys */
    { "truncated", RAW("\xa3\x62id\x01\x62op"), "bad_frame" },
    { "unknown-op", RAW("\xa2\x62id\x07\x62op\x64nope"), "unknown_op" },
    { "not-a-map", RAW("\x83\x01\x02\x03"), "bad_frame" },
    { "empty", RAW(""), "bad_frame" },
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    if (send_frame(bad[i].p, bad[i].n)) { fprintf(stderr, "write failed\n"); return finish(4); }
    resp = recv_frame(&n);
    if (!resp) { report(bad[i].name, 0, "the bridge closed the link"); return finish(1); }
    code[0] = 0;
    get_text(resp, n, "error", "code", NULL, code, sizeof code);
    int okv = 1;
    get_bool(resp, n, "ok", NULL, &okv);
    snprintf(detail, sizeof detail, "code=%s", code);
    report(bad[i].name, okv == 0 && strcmp(code, bad[i].expect) == 0, detail);
    free(resp);
  }
  {
    size_t big = (256u * 1024u) + 1u;
    uint8_t *zeros = calloc(big, 1);
    if (!zeros) { perror("calloc"); return finish(3); }
    int failed = send_frame(zeros, big);
    free(zeros);
    if (failed) { fprintf(stderr, "write failed\n"); return finish(4); }
    resp = recv_frame(&n);
    code[0] = 0;
    if (resp) get_text(resp, n, "error", "code", NULL, code, sizeof code);
    snprintf(detail, sizeof detail, "code=%s", code);
    report("oversized", resp && strcmp(code, "bad_frame") == 0, detail);
    free(resp);
  }

  /* 5. still serving: status reports the accepted payment */
  b.len = 0;
  head(&b, 5, 2);
  text(&b, "id"); head(&b, 0, 9);
  text(&b, "op"); text(&b, "status");
  ok = call(&b, &resp, &n);
  report("status-after-abuse", ok, "");
  free(resp);

  close(to_bridge);
  int status = 0;
  waitpid(pid, &status, 0);
  snprintf(detail, sizeof detail, "exit=%d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  report("bridge-exit", WIFEXITED(status) && WEXITSTATUS(status) == 0, detail);
  printf("firmware: %s\n", failures ? "FAILED" : "all steps passed");
  return finish(failures ? 1 : 0);
}
