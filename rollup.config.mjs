// The SDK bundles (ARCHITECTURE.md): noble and cbor-x are inlined, so the published package has
// no runtime dependencies. Types come from `tsc -p tsconfig.build.json` (typescript 7 has no JS API).
import esbuild from 'rollup-plugin-esbuild';
import { nodeResolve } from '@rollup/plugin-node-resolve';
import terser from '@rollup/plugin-terser';

// `module: false` for the IIFE: as an ES module terser would drop its unused top-level `var CTL`.
const plugins = (minify = false, module = true) => [
  nodeResolve({ browser: false, preferBuiltins: false }),
  esbuild({ target: 'es2020', minify: false, tsconfig: 'tsconfig.json' }),
  ...(minify ? [terser({ ecma: 2020, module, compress: { passes: 2 } })] : []),
];
// Our modules are side-effect free; this lets the edge build drop every noble import.
const treeshake = { moduleSideEffects: (id) => !id.includes('/src/') ? true : false };

export default [
  {
    input: 'src/index.ts',
    output: [
      { file: 'dist/index.js', format: 'esm', sourcemap: true },
      { file: 'dist/index.cjs', format: 'cjs', sourcemap: true, exports: 'named' },
    ],
    plugins: plugins(true),
    treeshake,
  },
  {
    input: 'src/index.ts',
    output: { file: 'dist/ctl.iife.js', format: 'iife', name: 'CTL', sourcemap: true },
    plugins: plugins(true, false),
    treeshake,
  },
  {
    // The compact (CBOR) form in its own entry, so the core verifier never carries cbor-x.
    input: 'src/compact.ts',
    output: { file: 'dist/compact.js', format: 'esm', sourcemap: true },
    plugins: plugins(true),
    treeshake,
  },
  {
    input: 'src/edge.ts',
    output: { file: 'dist/edge.js', format: 'esm', sourcemap: true },
    plugins: plugins(true),
    treeshake,
  },
];
