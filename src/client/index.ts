/** Agent-side gateway client (spec §4.4). */
export { createGatewayClient, GatewayError } from './gateway-client.js';
export { createLogFollower, type CheckpointStore, type LogFollower, type LogCheckResult } from './log-follower.js';
export type {
  GatewayClient,
  GatewayClientOptions,
  AgentSession,
  AgentSessionView,
  SessionConfig,
  CreatedSession,
  SessionView,
  SoftLimitInfo,
  OnSoftLimit,
  ProxyInit,
  WindowView,
  ChildSessionConfig,
  CreatedChildSession,
} from './gateway-client.js';
