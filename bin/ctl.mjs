#!/usr/bin/env node
// The `ctl` command: each subcommand lives in cli/<name>.ts (compiled to build/cli/<name>.js)
// and exports `main(args: string[]): Promise<number | void>`. Exit codes: 0 done, 1 failed or
// refused, 2 usage (unknown command or option, with its name).
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { join } from 'node:path';

const root = fileURLToPath(new URL('..', import.meta.url));
const [cmd, ...args] = process.argv.slice(2);
const usage = `usage: ctl <command> [args]    ctl <command> --help    ctl --version

commands:
  start                         authority + gateway on embedded SQLite (dev keys in ./data)
  authority [root-key]          the policy authority service
  gateway                       the payment gateway service
  demo                          the whole story against a demo merchant
  keygen                        a signing key pair (Ed25519 or P-256)
  root init|show|rotate         the fleet's Trust Bundle root key; its rotation (PROTOCOL.md §11)
  bundle verify|refresh         check a Trust Bundle; keep a device's bundle current
  verify                        the merchant verification of an SBA (JSON, header or compact CBOR)
  human keygen|grant|revoke     a person delegating a budget to an AI agent (did:key, PROTOCOL.md §10)
  anchor verify|deploy          check a log's anchors on the chains; deploy the anchoring contracts
  log audit|monitor             a service's transparency log checked from outside (pinned --vkey)`;

if (cmd === '--version' || cmd === '-V') {
  console.log(JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).version);
  process.exit(0);
}
if (cmd === '--help' || cmd === '-h' || cmd === 'help') {
  console.log(usage);
  process.exit(0);
}
if (!cmd) {
  console.error(usage);
  process.exit(2);
}
if (cmd.startsWith('-')) {
  console.error(`ctl: unknown option ${cmd}\n\n${usage}`);
  process.exit(2);
}
// A clone runs the compiled tree (build/cli/, `npm run compile`); the installed package carries
// the device commands bundled (dist/cli/, scripts/bundle-packages.mjs) and the services apart.
const SERVICE_ELSEWHERE = {
  authority: 'the ctl-authority package: npm install ctl-authority && npx ctl-authority',
  gateway: 'the ctl-gateway package: npm install ctl-gateway && npx ctl-gateway',
  start: 'a clone of the repository: npm install && npm start',
  demo: 'a clone of the repository: npm install && npm run demo',
};
const named = /^[a-z][a-z0-9-]*$/.test(cmd);
const file = [join(root, 'build', 'cli', `${cmd}.js`), join(root, 'dist', 'cli', `${cmd}.js`)].find(
  (f) => named && existsSync(f),
);
if (!file) {
  if (Object.hasOwn(SERVICE_ELSEWHERE, cmd)) console.error(`ctl ${cmd} runs from ${SERVICE_ELSEWHERE[cmd]}`);
  else if (!existsSync(join(root, 'build')) && !existsSync(join(root, 'dist', 'cli')))
    console.error('ctl: build/ is missing; run `npm run compile` first');
  else console.error(`ctl: unknown command '${cmd}'\n\n${usage}`);
  process.exit(2);
}
const mod = await import(pathToFileURL(file).href);
const code = await mod.main(args);
if (typeof code === 'number') process.exitCode = code;
