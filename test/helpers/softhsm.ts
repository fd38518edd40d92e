/**
 * A SoftHSM2 token of its own for a test process: a temporary token directory, a conf file
 * pointing at it, SOFTHSM2_CONF set (before any module is initialised, so call this first), and
 * one token initialised with `softhsm2-util` (installed by .ci/run when missing).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const SOFTHSM_MODULE = process.env.CTL_PKCS11_MODULE || '/usr/lib/softhsm/libsofthsm2.so';

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
