/**
 * The gateway's outbound requests, one forwarder per purpose (createGatewayApp): agents' /proxy
 * requests to merchants, owners' webhooks, and the checks of a person's grant at its authority.
 * Each leaves through the same address guard (net/address-guard.ts), with bounds that fit it.
 */
import { isIP } from 'node:net';
import { createForwarder, guardedFetch, type Forwarder } from './net/forwarder.js';
import { bareHost, type TargetPolicy } from './net/address-guard.js';
import type { HumanTrust } from './sessions/human.js';
import type { GatewayDeps } from './app-deps.js';

export interface Outbound {
  /** /proxy: an agent's request to a merchant. */
  forwarder: Forwarder;
  /** Session webhooks (sessions/events.ts). */
  hookForwarder: Forwarder;
  /** The trusted authorities whose people's grants may back sessions, and the fetch that reaches them. */
  humans: HumanTrust;
  /** Closes the forwarders (the agents', the webhooks', the authorities'). */
  close(): void;
}

/** @example const { forwarder, humans } = createOutbound(deps, deps.targets ?? { allowPrivate: false }) */
export function createOutbound(deps: GatewayDeps, targets: TargetPolicy): Outbound {
  const forwarder = createForwarder({
    policy: targets,
    timeoutMs: deps.forwardTimeoutMs,
    maxResponseBytes: deps.maxResponseBytes,
    resolve: deps.resolve,
    ca: deps.upstreamCa,
  });
  // Webhook URLs are the owner's, but they are still outbound requests from inside: same guard.
  const hookForwarder = createForwarder({
    policy: targets,
    timeoutMs: 5000,
    maxResponseBytes: 64 * 1024,
    maxRedirects: 0,
    resolve: deps.resolve,
  });
  // Revocation (and any JWKS) the SDK's verifier fetches for a person's grant: same guard, no
  // redirects. A trusted authority the operator named by a private IP address (no DNS in between)
  // is reachable by these checks alone, never opened to agents' /proxy or webhooks by it.
  const authorityForwarder = createForwarder({
    policy: {
      ...targets,
      allowHosts: [...(targets.allowHosts ?? []), ...authorityTargets(deps.humanAuthorities ?? [])],
    },
    timeoutMs: 3000,
    maxResponseBytes: 64 * 1024,
    maxRedirects: 0,
    resolve: deps.resolve,
  });
  const humans = { authorities: deps.humanAuthorities ?? [], fetch: guardedFetch(authorityForwarder) };
  return {
    forwarder,
    hookForwarder,
    humans,
    close() {
      forwarder.close();
      hookForwarder.close();
      authorityForwarder.close();
    },
  };
}

/**
 * The `ip:port` of each trusted authority whose base URL names an IP address, as the address guard's
 * allowHosts reads them. A name is not excepted: what it resolves to is not what the operator wrote.
 */
function authorityTargets(bases: readonly string[]): string[] {
  return bases.flatMap((base) => {
    try {
      const u = new URL(base);
      if (!isIP(bareHost(u))) return [];
      return [`${bareHost(u)}:${u.port || (u.protocol === 'https:' ? '443' : '80')}`];
    } catch {
      return [];
    }
  });
}
