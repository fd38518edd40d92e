/**
 * Debian packages some tests drive as they are (.ci/run installs every one). On a machine
 * without one, the tests that need it are skipped, never crashed: the file prints one line
 * starting `SKIPPED` that names the package, uvu counts each test as skipped, and
 * scripts/test.mjs sums them up (under CI=true a skip fails the run: CI has them all).
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { test as uvuTest, type Test } from 'uvu';

export type DebianPackage = 'softhsm2' | 'python3-requests' | 'curl' | 'golang-golang-x-mod-dev';

/** Where Debian's golang-golang-x-mod-dev puts golang.org/x/mod's source, its tests included. */
export const XMOD_SOURCE = '/usr/share/gocode/src/golang.org/x/mod';

/** The PKCS#11 module the SoftHSM2 tests load (Debian's softhsm2 puts it here). */
export const SOFTHSM_MODULE = process.env.CTL_PKCS11_MODULE || '/usr/lib/softhsm/libsofthsm2.so';
/** Debian's interpreter, where python3-requests installs (not a pip copy in a virtualenv). */
export const PYTHON3 = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

/** Exit status of a command run quietly, or null when it is not on the PATH. */
const runs = (cmd: string, args: string[]) => {
  const r = spawnSync(cmd, args, { stdio: 'ignore', timeout: 10_000 });
  return r.error ? null : r.status;
};

/** What is missing, in a few words, or undefined when the package is there. */
const PROBES: Record<DebianPackage, () => string | undefined> = {
  softhsm2: () =>
    runs('softhsm2-util', ['--version']) === null
      ? 'no softhsm2-util on the PATH'
      : existsSync(SOFTHSM_MODULE)
        ? undefined
        : `no PKCS#11 module at ${SOFTHSM_MODULE}`,
  'python3-requests': () => {
    const status = runs(PYTHON3, ['-c', 'import requests']);
    return status === null ? `no ${PYTHON3}` : status !== 0 ? `${PYTHON3} cannot import requests` : undefined;
  },
  curl: () => (runs('curl', ['--version']) === null ? 'no curl on the PATH' : undefined),
  'golang-golang-x-mod-dev': () =>
    existsSync(`${XMOD_SOURCE}/sumdb/note/note_test.go`) ? undefined : `no ${XMOD_SOURCE}/sumdb/note/note_test.go`,
};

const probed = new Map<DebianPackage, string | undefined>();

/** Why `pkg` cannot be used here, or undefined when it can (probed once per process). */
export function missingPackage(pkg: DebianPackage): string | undefined {
  if (!probed.has(pkg)) probed.set(pkg, PROBES[pkg]());
  return probed.get(pkg);
}

/**
 * uvu's `test` for tests that need `pkg` (`what` names them in the skip line). When the package is
 * missing, each test registered through it is counted as skipped and its hooks never run.
 */
export function testsNeeding(pkgs: DebianPackage | DebianPackage[], what: string, t: Test = uvuTest): Test {
  const missing = (Array.isArray(pkgs) ? pkgs : [pkgs])
    .map((pkg) => [pkg, missingPackage(pkg)] as const)
    .filter(([, why]) => why);
  if (!missing.length) return t;
  const names = missing.map(([pkg]) => pkg).join(' ');
  console.log(
    `SKIPPED ${what}: needs the Debian package${missing.length > 1 ? 's' : ''} ${names} ` +
      `(${missing.map(([, why]) => why).join('; ')}): apt-get install ${names}`,
  );
  const skip = (name?: string) => t.skip(name);
  const noHook = Object.assign(() => {}, { each: () => {} });
  return Object.assign(skip, { only: skip, skip, before: noHook, after: noHook, run: () => t.run() });
}
