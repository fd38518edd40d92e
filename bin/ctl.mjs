#!/usr/bin/env node
// The `ctl` command: each subcommand lives in cli/<name>.ts (compiled to build/cli/<name>.js)
// and exports `main(args: string[]): Promise<number | void>`.
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { join } from 'node:path';

const root = fileURLToPath(new URL('..', import.meta.url));
const [cmd, ...args] = process.argv.slice(2);
const usage = `usage: ctl <command> [args]

commands:
  start                       authority + gateway on embedded SQLite (dev keys in ./data)
  authority [root-key]        the policy authority service
  gateway                     the payment gateway service
  demo                        the whole story against a demo merchant
  keygen, root, bundle, verify  device tooling (ctl <command> --help)`;

if (!cmd || cmd === '--help' || cmd === '-h' || !/^[a-z][a-z0-9-]*$/.test(cmd)) {
  console.log(usage);
  process.exit(cmd ? 0 : 1);
}
const file = join(root, 'build', 'cli', `${cmd}.js`);
if (!existsSync(file)) {
  if (!existsSync(join(root, 'build'))) console.error('ctl: build/ is missing; run `npm run compile` first');
  else console.error(`ctl: unknown command '${cmd}'\n\n${usage}`);
  process.exit(2);
}
const mod = await import(pathToFileURL(file).href);
const code = await mod.main(args);
if (typeof code === 'number') process.exitCode = code;
