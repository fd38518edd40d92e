/**
 * `ctl gateway` / `npm run gateway`: the payment gateway from the environment (gateway/server.ts).
 */
import { gatewayOptionsFromEnv, startGateway } from '../gateway/server.js';
import { guard, parseArgs, UsageError } from './device/args.js';
import { preflight, runUntilSignal, startFailure, warnNoAdminKey } from './service/lifecycle.js';

const usage = (program: string) => `usage: ${program}

Runs the payment gateway; SIGTERM or SIGINT stops it: requests in flight finish (at most 10 s),
then it exits 0.

environment:
  PORT (8402), HOST (127.0.0.1), DATABASE_URL (sqlite:./data/gateway.db | postgres://…), LOG_LEVEL (info)
  CTL_GATEWAY_ADMIN_KEY        bootstrap key: POST /admin/owners { label } → { ownerId, keyId, apiKey }
  CTL_GATEWAY_PUBLIC_URL       base URL written into grants (default: the request origin)
  CTL_GATEWAY_ISSUER           issuer of the gateway's grants and receipts
  CTL_GATEWAY_ALLOW_PRIVATE_TARGETS=1   let /proxy reach private addresses (tests, private deployments)
  CTL_GATEWAY_ALLOW_TARGETS=host:port,… exact private targets to allow
  CTL_X402_ASSETS, CTL_X402_MAX_TIMEOUT_SECONDS, CTL_X402_RPC_URL, CTL_GATEWAY_EVM_PRIVATE_KEY   x402 payments
  CTL_GATEWAY_KEK              32 bytes (base64url or hex) sealing the keys and secrets kept in the database
                               (or CTL_GATEWAY_KEK_PKCS11_URI: an AES key in a token; default: ./data/gateway.kek, dev only)
  CTL_GATEWAY_RECEIPT_KEY_PKCS11_URI   the receipt key in an HSM (RFC 7512), with CTL_PKCS11_MODULE
  CTL_GATEWAY_RATE_LIMIT_OWNER (6000/60s)    owner API requests per budget owner, all its keys together; 0: none
  CTL_GATEWAY_RATE_LIMIT_SESSION (1200/60s)  agent requests per session (/proxy); 0: none
  CTL_GATEWAY_MAX_SESSION_SECONDS (2592000)  longest session: expiresAt at most this far ahead`;

/** `program`: the name it was run by, for usage and errors (`ctl gateway`, or the package's `ctl-gateway`). */
export async function main(args: string[], program = 'ctl gateway'): Promise<number> {
  const USAGE = usage(program);
  if (args.includes('--help') || args.includes('-h')) return console.log(USAGE), 0;
  return guard(USAGE, async () => {
    const p = parseArgs(args, {});
    if (p.positionals.length) throw new UsageError(`unexpected argument ${p.positionals[0]}`);
    let options;
    try {
      options = gatewayOptionsFromEnv(process.env);
    } catch (e) {
      console.error(`${program}: ${(e as Error).message}`);
      return 2;
    }
    const refused = await preflight(program, options.databaseUrl);
    if (refused !== undefined) return refused;
    let running;
    try {
      running = await startGateway(options);
    } catch (e) {
      return startFailure(program, e);
    }
    if (!options.adminKey) warnNoAdminKey(running.logger, 'CTL_GATEWAY_ADMIN_KEY', 'no budget owner can be created (POST /admin/owners)');
    return runUntilSignal(running.logger, () => running.close());
  });
}
