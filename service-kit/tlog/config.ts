/**
 * A service's log settings from its environment, `<P>` being `CTL_GATEWAY` or `CTL_AUTHORITY`:
 *
 * - `<P>_LOG` — `1` (default) or `0`: no log (development and the cost bench only);
 * - `<P>_LOG_ORIGIN` — the origin of a new log (default `<public host>/ctl-gateway-log`, …);
 * - `<P>_LOG_PRIVATE_KEY` — the log's note key `PRIVATE+KEY+<origin>+…` (default made once, sealed in the database);
 * - `<P>_LOG_WITNESSES` — `<add-checkpoint URL prefix>=<witness vkey>`, comma-separated;
 * - `<P>_WITNESS_OF` — the vkeys of the logs this service witnesses, comma-separated;
 * - `<P>_WITNESS_PRIVATE_KEY` / `<P>_WITNESS_NAME` — its cosigning key (type 0x04), or the name of one made once;
 * - `<P>_LOG_ALERT_URL`, `<P>_LOG_ALERT_SECRET` — where a split view is sent (Standard Webhooks, `whsec_…`).
 *
 * Each error is one line starting with the variable's name.
 */
import { COSIGNATURE_V1, ED25519_NOTE, readNoteKeyText, readVerifierKey } from './note-key.js';
import type { ServiceLogConfig } from './service.js';
import type { VariableHelp } from '../config.js';

/**
 * The log's variables for a service's known list (its `--help` and the unknown-name check).
 * @example [...logVariables('CTL_GATEWAY', 'ctl-gateway-log')]
 */
export function logVariables(p: string, name: string): VariableHelp[] {
  return [
    [`${p}_LOG`, '1', 'transparency log: 1 on, 0 off (development and the cost bench only)'],
    [`${p}_LOG_ORIGIN`, `<public host>/${name}`, 'the origin of a new log'],
    [`${p}_LOG_PRIVATE_KEY`, undefined, "the log's note key PRIVATE+KEY+... (default: made once, sealed)"],
    [`${p}_LOG_WITNESSES`, undefined, '<add-checkpoint URL prefix>=<witness vkey>,... witnesses to ask'],
    [`${p}_WITNESS_OF`, undefined, 'vkey,... the logs this service witnesses'],
    [`${p}_WITNESS_PRIVATE_KEY`, undefined, 'its cosigning key (default: made once, sealed)'],
    [`${p}_WITNESS_NAME`, undefined, 'the name of the cosigning key made once'],
    [`${p}_LOG_ALERT_URL`, undefined, 'where a split view is sent (Standard Webhooks)'],
    [`${p}_LOG_ALERT_SECRET`, undefined, 'whsec_... secret of the split-view webhook'],
  ];
}

type Env = Record<string, string | undefined>;

function fail(variable: string, message: string): never {
  throw new RangeError(`${variable}: ${message}`);
}

function checkUrl(v: string, variable: string): string {
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    fail(variable, `'${v}' is not an absolute URL`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') fail(variable, `'${v}' is not an http(s) URL`);
  return v.replace(/\/+$/, '');
}

const list = (v: string | undefined) =>
  (v ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

/** The log settings, or `false` when `<P>_LOG=0`. `defaultOrigin` names a new log. */
export function serviceLogConfigFromEnv(
  env: Env,
  p: string,
  o: { defaultOrigin: string },
): Omit<ServiceLogConfig, 'prefix'> | false {
  const on = env[`${p}_LOG`]?.trim() ?? '';
  if (on === '0') return false;
  if (on !== '' && on !== '1') fail(`${p}_LOG`, `expected 1 (on) or 0 (off), got '${on}'`);
  const skey = env[`${p}_LOG_PRIVATE_KEY`]?.trim() || undefined;
  if (skey) {
    try {
      if (readNoteKeyText(skey).type !== ED25519_NOTE) fail(`${p}_LOG_PRIVATE_KEY`, 'not an Ed25519 note key');
    } catch (e) {
      fail(`${p}_LOG_PRIVATE_KEY`, (e as Error).message);
    }
  }
  const witnesses = list(env[`${p}_LOG_WITNESSES`]).map((item) => {
    const at = item.indexOf('=');
    if (at < 0) fail(`${p}_LOG_WITNESSES`, `expected <url>=<vkey>, got '${item}'`);
    const vkey = item.slice(at + 1);
    try {
      readVerifierKey(vkey, COSIGNATURE_V1);
    } catch (e) {
      fail(`${p}_LOG_WITNESSES`, (e as Error).message);
    }
    return { url: checkUrl(item.slice(0, at), `${p}_LOG_WITNESSES`), vkey };
  });
  const witnessOf = list(env[`${p}_WITNESS_OF`]);
  for (const vkey of witnessOf) {
    try {
      readVerifierKey(vkey, ED25519_NOTE);
    } catch (e) {
      fail(`${p}_WITNESS_OF`, (e as Error).message);
    }
  }
  const alertUrl = env[`${p}_LOG_ALERT_URL`]?.trim();
  const alertSecret = env[`${p}_LOG_ALERT_SECRET`]?.trim();
  if (!!alertUrl !== !!alertSecret) fail(`${p}_LOG_ALERT_URL`, `set it together with ${p}_LOG_ALERT_SECRET`);
  return {
    origin: env[`${p}_LOG_ORIGIN`]?.trim() || (skey ? readNoteKeyText(skey).name : o.defaultOrigin),
    ...(skey ? { skey } : {}),
    ...(witnesses.length ? { witnesses } : {}),
    ...(witnessOf.length ? { witnessOf } : {}),
    ...(env[`${p}_WITNESS_PRIVATE_KEY`]?.trim() ? { witnessSkey: env[`${p}_WITNESS_PRIVATE_KEY`]!.trim() } : {}),
    ...(env[`${p}_WITNESS_NAME`]?.trim() ? { witnessName: env[`${p}_WITNESS_NAME`]!.trim() } : {}),
    ...(alertUrl ? { alert: { url: checkUrl(alertUrl, `${p}_LOG_ALERT_URL`), secret: alertSecret! } } : {}),
  };
}

/** `<host>/<name>` for a new log: the public URL's host, else this machine's name. */
export function defaultLogOrigin(publicUrl: string | undefined, hostname: string, name: string): string {
  let host = hostname || 'localhost';
  if (publicUrl) {
    try {
      host = new URL(publicUrl).host;
    } catch {
      // the service checks its public URL itself
    }
  }
  return `${host.replace(/[\s+\u2014]/g, '-')}/${name}`;
}
