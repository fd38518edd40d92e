/**
 * A SoftHSM2 token of its own for a test process: a temporary token directory, a conf file
 * pointing at it, SOFTHSM2_CONF set (before any module is initialised, so call this first), and
 * one token initialised with `softhsm2-util` (Debian's softhsm2, installed by .ci/run). Without
 * softhsm2 the directory is still made but no token: the tests that use one are registered through
 * `testsNeeding('softhsm2', …)` (system-packages.ts), which skips them saying so.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { missingPackage, SOFTHSM_MODULE } from './system-packages.js';

export { SOFTHSM_MODULE };

export interface TestToken {
  dir: string;
  label: string;
  pin: string;
  /** `pkcs11:token=<label>;object=<object>?pin-value=<pin>` */
  uri(object: string): string;
  /** Removes the token directory. */
  remove(): void;
}

/** Creates the token directory and conf, sets SOFTHSM2_CONF, and initialises tokens labelled `labels`. */
export function createSoftHsm(labels: string[] = ['ctl'], pin = '1234'): TestToken {
  const dir = mkdtempSync(join(tmpdir(), 'ctl-softhsm-'));
  mkdirSync(join(dir, 'tokens'));
  const conf = join(dir, 'softhsm2.conf');
  writeFileSync(conf, `directories.tokendir = ${join(dir, 'tokens')}\nobjectstore.backend = file\nlog.level = ERROR\n`);
  process.env.SOFTHSM2_CONF = conf;
  if (missingPackage('softhsm2')) process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  else
    for (const label of labels) {
      execFileSync('softhsm2-util', ['--init-token', '--free', '--label', label, '--so-pin', '0000', '--pin', pin], {
        env: process.env,
        stdio: 'pipe',
      });
    }
  const label = labels[0];
  return {
    dir,
    label,
    pin,
    uri: (object) => `pkcs11:token=${label};object=${object}?pin-value=${pin}`,
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
