/**
 * `ctl gateway` / `npm run gateway`: the payment gateway from the environment (gateway/server.ts).
 */
import { gatewayOptionsFromEnv, startGateway } from '../gateway/server.js';

export async function main(args: string[]): Promise<number | void> {
  if (args.includes('--help') || args.includes('-h')) {
    console.log(`usage: ctl gateway

environment:
  PORT (8402), HOST (127.0.0.1), DATABASE_URL (sqlite:./data/gateway.db | postgres://…)
  CTL_GATEWAY_ADMIN_KEY        bootstrap key: POST /admin/owners { label } → { ownerId, apiKey }
  CTL_GATEWAY_PUBLIC_URL       base URL written into grants (default: the request origin)
  CTL_GATEWAY_ALLOW_PRIVATE_TARGETS=1   let /proxy reach private addresses (tests, private deployments)
  CTL_GATEWAY_ALLOW_TARGETS=host:port,… exact private targets to allow`);
    return 0;
  }
  const running = await startGateway(gatewayOptionsFromEnv(process.env));
  console.log(`gateway listening on ${running.server.url}`);
  const stop = async () => {
    await running.close();
    process.exit(0);
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  await new Promise(() => {}); // runs until a signal
}
