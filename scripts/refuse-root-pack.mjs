// The root's `prepack`: `npm pack` (or `npm publish`) at the repository root would pack the
// clone's own manifest (scripts, workspaces, devDependencies, no declarations) in place of a
// package. The SDK is packed from a directory of its own (scripts/sdk-package.mjs), the services and
// tools from their workspaces; this names the command and stops npm before it packs anything.
console.error(`npm pack at the repository root makes no package: the root package.json is the clone's.
  the SDK (ctl):                 npm run pack:sdk        (builds, writes pack/ctl and packs it)
  the services and agent tools:  npm pack --workspaces`);
process.exit(1);
