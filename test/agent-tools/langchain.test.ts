/**
 * The gateway session's tools in a LangChain.js agent turn: LangChain's own fake chat models
 * (`@langchain/core/utils/testing`), bound to the tools with `bindTools`, script the model's
 * steps; the tool-calling loop runs each tool call (`tool.invoke(toolCall)` → ToolMessage), and
 * the tools pay through a real gateway (SQLite) to a local 402 merchant. What each model step was
 * given is read from its callbacks: the merchant's paid answer, the spend, a refusal past the ceiling.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { AIMessage, AIMessageChunk, HumanMessage, ToolMessage, type BaseMessage } from '@langchain/core/messages';
import { FakeListChatModel, FakeStreamingChatModel } from '@langchain/core/utils/testing';
import type { DynamicStructuredTool } from '@langchain/core/tools';
import { ctlLangChainTools } from '../../agent-tools/langchain.js';
import { call, createSession, useGatewayAndMerchant } from '../gateway/helpers.js';

const PRICES: Record<string, string> = { '/report': '250', '/big': '5000' };
const env = useGatewayAndMerchant(test, { amount: (path) => PRICES[path] ?? '100' });

/** A model step that calls one tool (LangChain's fake streaming model answers its `chunks`' tool calls). */
const callsTool = (id: string, name: string, args: Record<string, unknown>) =>
  new FakeStreamingChatModel({
    responses: [new AIMessage('')],
    chunks: [new AIMessageChunk({ content: '', tool_calls: [{ id, name, args, type: 'tool_call' }] })],
  });
const says = (text: string) => new FakeListChatModel({ responses: [text] });

type Step = ReturnType<typeof callsTool> | ReturnType<typeof says>;

/**
 * The usual tool-calling loop: each step's model is bound to the tools and given the
 * conversation so far; every tool call it makes is run and its ToolMessage added.
 * Returns the conversation, the messages each step received, and the tool specs it was bound with.
 */
async function runAgent(steps: Step[], tools: DynamicStructuredTool[], prompt: string) {
  const byName = new Map(tools.map((t) => [t.name, t]));
  const messages: BaseMessage[] = [new HumanMessage(prompt)];
  const received: BaseMessage[][] = [];
  const bound: unknown[] = [];
  for (const model of steps) {
    const reply = await model.bindTools(tools).invoke(messages, {
      callbacks: [
        {
          handleChatModelStart(_llm, msgs, _runId, _parent, extra) {
            received.push(msgs[0]!);
            bound.push((extra as { options?: { tools?: unknown } })?.options?.tools);
          },
        },
      ],
    });
    messages.push(reply);
    for (const tc of reply.tool_calls ?? []) messages.push((await byName.get(tc.name)!.invoke(tc)) as ToolMessage);
  }
  return { messages, received, bound };
}

/** The ToolMessage for `toolCallId` among the messages a step received. */
function shown(received: BaseMessage[], toolCallId: string): ToolMessage {
  const m = received.find((x) => ToolMessage.isInstance(x) && x.tool_call_id === toolCallId);
  if (!m) throw new Error(`the model was not given a result for ${toolCallId}`);
  return m as ToolMessage;
}

async function ownerReceipts(sessionId: string) {
  return (await call(env.gw.url, 'GET', `/sessions/${sessionId}/receipts`, { key: env.gw.ownerKey })).body.receipts as {
    receiptId: string;
  }[];
}

test('an agent turn: the model pays through the gateway, sees the spend, and is refused past the ceiling', async () => {
  const s = await createSession(env.gw);
  const paidBefore = env.merchant.paid.length;
  const tools = ctlLangChainTools({ gatewayUrl: env.gw.url, sessionToken: s.sessionToken });
  const { messages, received, bound } = await runAgent(
    [
      callsTool('c1', 'paid_fetch', {
        url: `${env.merchant.url}/report`,
        method: 'POST',
        body: '{"q":"tides"}',
        headers: { 'content-type': 'application/json' },
        purpose: 'api:search',
      }),
      callsTool('c2', 'session_status', {}),
      callsTool('c3', 'paid_fetch', { url: `${env.merchant.url}/big`, purpose: 'api:search' }),
      says('The report is paid; the big one is over budget.'),
    ],
    tools,
    'Get the tide report, then the big one.',
  );
  assert.is(messages.at(-1)!.content, 'The report is paid; the big one is over budget.');

  // The model was bound to the five tools with their JSON schemas (OpenAI style).
  const specs = bound[0] as { function: { name: string; parameters: any } }[];
  assert.equal(specs.map((t) => t.function.name).sort(), [
    'check_log',
    'delegate_budget',
    'list_receipts',
    'paid_fetch',
    'session_status',
  ]);
  const fetchSpec = specs.find((t) => t.function.name === 'paid_fetch')!.function.parameters;
  assert.equal(fetchSpec.required, ['url']);
  assert.is(fetchSpec.properties.purpose.type, 'string');

  // Step 2 was given the merchant's paid answer, with the gateway's receipt.
  const paid = shown(received[1]!, 'c1');
  assert.is(paid.status, 'success');
  assert.is(paid.name, 'paid_fetch');
  const out = paid.artifact as Record<string, any>;
  assert.is(out.outcome, 'response');
  assert.is(JSON.parse(out.body).paid, true);
  assert.is(JSON.parse(out.body).body, '{"q":"tides"}', 'the request body reached the merchant');
  assert.equal(out.amountPaid, { amountMinor: '250', currency: 'USD' });
  assert.match(out.idempotencyKey, /^lc_/);
  assert.equal(JSON.parse(paid.content as string), out, 'the model reads the same answer as JSON');
  assert.equal(
    (await ownerReceipts(s.sessionId)).map((r) => r.receiptId),
    [out.receiptId],
  );

  // Step 3 was given the spend.
  const status = shown(received[2]!, 'c2').artifact as Record<string, any>;
  assert.is(status.spentMinor, '250');
  assert.is(status.remainingMinor, '750');

  // Step 4 was given the refusal as a tool error with its §9 code; nothing more was paid.
  const refused = shown(received[3]!, 'c3');
  assert.is(refused.status, 'error');
  assert.is((refused.artifact as { code: string }).code, 'budget_exceeded');
  assert.match(refused.content as string, /^Refused by the gateway \(budget_exceeded\)/);
  assert.is(env.merchant.paid.length, paidBefore + 1);
  assert.is((await ownerReceipts(s.sessionId)).length, 1);
});

test('a paused session is a success telling the model to ask the budget owner, not an error', async () => {
  const s = await createSession(env.gw, { budget: { amount: '200', currency: 'USD' }, softLimit: { amount: '100' } });
  const tools = ctlLangChainTools({ gatewayUrl: env.gw.url, sessionToken: s.sessionToken, tools: ['paid_fetch'] });
  const data = { url: `${env.merchant.url}/data`, purpose: 'api:search' };
  const { received, bound } = await runAgent(
    [
      callsTool('p1', 'paid_fetch', data),
      callsTool('p2', 'paid_fetch', data),
      callsTool('p3', 'paid_fetch', data),
      says('I asked the owner.'),
    ],
    tools,
    'Fetch the data three times.',
  );
  assert.equal(
    (bound[0] as { function: { name: string } }[]).map((t) => t.function.name),
    ['paid_fetch'],
  );
  const paused = shown(received[3]!, 'p3');
  assert.is(paused.status, 'success');
  const out = paused.artifact as Record<string, any>;
  assert.is(out.outcome, 'paused');
  assert.ok(out.ownerAction.includes(`PATCH ${env.gw.url}/sessions/${s.sessionId}`), out.ownerAction);
  assert.match(paused.content as string, /^PAUSED, nothing paid/);
});

test('delegate_budget invoked with plain arguments answers the child token; a widening field is refused', async () => {
  const s = await createSession(env.gw);
  const [delegate] = ctlLangChainTools({
    gatewayUrl: env.gw.url,
    sessionToken: s.sessionToken,
    tools: ['delegate_budget'],
  });
  const made = JSON.parse((await delegate!.invoke({ amountMinor: '200', purposes: ['api:search'] })) as string);
  assert.equal([made.outcome, made.parentId, made.depth], ['delegated', s.sessionId, 1]);
  const [status] = ctlLangChainTools({
    gatewayUrl: env.gw.url,
    sessionToken: made.sessionToken,
    tools: ['session_status'],
  });
  const st = JSON.parse((await status!.invoke({})) as string);
  assert.equal([st.budgetMinor, st.remainingMinor, st.parentId], ['200', '200', s.sessionId]);
  const wide = (await delegate!.invoke({
    id: 'w1',
    name: 'delegate_budget',
    args: { amountMinor: '1001' },
    type: 'tool_call',
  })) as ToolMessage;
  assert.is(wide.status, 'error');
  assert.is((wide.artifact as { code: string }).code, 'delegation_invalid');
});

test('invoked with plain arguments, a tool answers the content text', async () => {
  const s = await createSession(env.gw);
  const [status] = ctlLangChainTools({
    gatewayUrl: env.gw.url,
    sessionToken: s.sessionToken,
    tools: ['session_status'],
  });
  const text = await status!.invoke({});
  assert.type(text, 'string');
  assert.is(JSON.parse(text as string).sessionId, s.sessionId);
  const unknown = ctlLangChainTools({ gatewayUrl: env.gw.url, sessionToken: 'gw_sess_' + 'A'.repeat(43) });
  const refused = (await unknown[1]!.invoke({
    id: 'u1',
    name: 'session_status',
    args: {},
    type: 'tool_call',
  })) as ToolMessage;
  assert.is(refused.status, 'error');
  assert.match(refused.content as string, /unauthorized/);
});

test.run();
