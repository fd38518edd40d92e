// The SDK bundles (ARCHITECTURE.md): noble and cbor-x are inlined, so the published package has
// no runtime dependencies. Every ESM entry has a CommonJS twin (.cjs) for `require` users. Types come from `tsc -p
// tsconfig.build.json` (typescript 7 has no JS API).
import esbuild from 'rollup-plugin-esbuild';
import { nodeResolve } from '@rollup/plugin-node-resolve';
import terser from '@rollup/plugin-terser';
import { fileURLToPath } from 'node:url';

// `module: false` for the IIFE: as an ES module terser would drop its unused top-level `var CTL`.
// ES2022 as written (class fields, `??=`): every runtime of the portable suite has it (QuickJS
// too), and lowering to ES2020 cost ~100–220 bytes gzip per bundle in helpers and temporaries.
// A third terser pass is worth a few dozen bytes more and costs nothing at run time.
// The IIFEs (embedded engines) keep single-use functions where they are (`reduce_funcs: false`):
// QuickJS keeps every function's source text, so a function inlined into its one caller is kept
// twice, inside the caller's text and as its own (the verifier IIFE's heap after loading: 213 →
// 192 KiB, and 239 → 214 KiB after 100 verifications, for ~120 bytes gzip more).
// Module swaps, by build (each a file with the same exports, chosen where a role cannot reach the other):
// - embedded (the role IIFEs): no node:crypto, WebCrypto or environment in such an engine, so
//   src/host-embedded.ts stands in for src/host.ts and src/crypto/native-none.ts for native.ts,
//   and the native backends drop out (ctl.iife.js, which a browser page may load, keeps them);
// - verifyOnly (ctl/verify): its facade refuses private keys, so the noble backend is
//   src/crypto/noble-verify-backend.ts (our BigInt Ed25519 verify) and @noble/ed25519 drops out.
const here = (file) => fileURLToPath(new URL(file, import.meta.url));
const SWAPS = {
  embedded: [
    [/(^|\/)host\.js$/, here('src/host-embedded.ts')],
    [/^\.\/native\.js$/, here('src/crypto/native-none.ts')],
  ],
  verifyOnly: [[/^\.\/noble-backend\.js$/, here('src/crypto/noble-verify-backend.ts')]],
};
const swap = (kinds) => {
  const rules = kinds.flatMap((k) => SWAPS[k]);
  return {
    name: 'ctl-swap',
    resolveId(source, importer) {
      if (!importer || !importer.includes('/src/') || rules.some(([, file]) => importer === file)) return null;
      return rules.find(([re]) => re.test(source))?.[1] ?? null;
    },
  };
};
const plugins = (minify = false, module = true, swaps = []) => [
  ...(swaps.length ? [swap(swaps)] : []),
  nodeResolve({ browser: false, preferBuiltins: false }),
  esbuild({ target: 'es2022', minify: false, tsconfig: 'tsconfig.json' }),
  // Error classes keep their names: a minified `CtlError` printed as `t [CtlError]` reads as a bug.
  ...(minify
    ? [terser({ ecma: 2020, module, keep_classnames: /Error$/, compress: { passes: 3, reduce_funcs: module } })]
    : []),
];
// Every build has its map, for stacks that read as the sources (`--enable-source-maps`); the map
// names src/ files and lines without embedding their text, which was 7.6 of the SDK package's 9.1 MB.
const map = { sourcemap: true, sourcemapExcludeSources: true };
// Our modules are side-effect free; this lets the edge build drop every noble import.
const treeshake = { moduleSideEffects: (id) => (!id.includes('/src/') ? true : false) };

// One ESM + CJS pair per `exports` entry; role entries also as IIFEs (global `CTL`, `CTLP256`) for embedded engines.
const pair = (name, input = `src/entries/${name}.ts`, swaps = []) => ({
  input,
  output: [
    { file: `dist/${name}.js`, format: 'esm', ...map },
    { file: `dist/${name}.cjs`, format: 'cjs', ...map, exports: 'named' },
  ],
  plugins: plugins(true, true, swaps),
  treeshake,
});
const iife = (file, input, name = 'CTL', swaps = ['embedded']) => ({
  input,
  output: { file: `dist/${file}`, format: 'iife', name, ...map },
  plugins: plugins(true, false, swaps),
  treeshake,
});

export default [
  // Role entries (docs/sdk-api.md): a terminal that only verifies, a device that only signs, and the opt-in modules.
  pair('verify', undefined, ['verifyOnly']),
  pair('wallet'),
  pair('p256'),
  // Opt-in verifier modules (src/verifier/features.ts) the role verifiers do not carry by default.
  pair('human-agent'),
  pair('online'),
  // What only a service or a host tool takes beside `ctl` (receipt signing per payment); no IIFE.
  pair('server'),
  // The SpendStorage conformance suite an integrator runs against its own storage (test-time only).
  pair('testing'),
  // The transparency log (RFC 9162, C2SP checkpoints, tiles, tlog-proof): services, the CLI, clients.
  // It signs only with a SigningKey it is handed, so the verify-only backend serves it.
  pair('log', undefined, ['verifyOnly']),
  iife('ctl-verify.iife.js', 'src/entries/verify.ts', 'CTL', ['embedded', 'verifyOnly']),
  iife('ctl-wallet.iife.js', 'src/entries/wallet.ts'),
  iife('ctl-p256.iife.js', 'src/entries/p256.ts', 'CTLP256'),
  iife('ctl-human-agent.iife.js', 'src/entries/human-agent.ts', 'CTLHumanAgent'),
  iife('ctl-log.iife.js', 'src/entries/log.ts', 'CTLLog', ['embedded', 'verifyOnly']),
  {
    input: 'src/index.ts',
    output: [
      { file: 'dist/index.js', format: 'esm', ...map },
      { file: 'dist/index.cjs', format: 'cjs', ...map, exports: 'named' },
    ],
    plugins: plugins(true),
    treeshake,
  },
  {
    input: 'src/index.ts',
    output: { file: 'dist/ctl.iife.js', format: 'iife', name: 'CTL', ...map },
    plugins: plugins(true, false),
    treeshake,
  },
  {
    // The compact (CBOR) form in its own entry, so the core verifier never carries cbor-x.
    input: 'src/entries/compact.ts',
    output: [
      { file: 'dist/compact.js', format: 'esm', ...map },
      { file: 'dist/compact.cjs', format: 'cjs', ...map, exports: 'named' },
    ],
    plugins: plugins(true),
    treeshake,
  },
  {
    input: 'src/edge.ts',
    output: [
      { file: 'dist/edge.js', format: 'esm', ...map },
      { file: 'dist/edge.cjs', format: 'cjs', ...map, exports: 'named' },
    ],
    plugins: plugins(true),
    treeshake,
  },
];
