/**
 * The gateway session's tools in a Vercel AI SDK agent turn: `generateText` drives a scripted
 * model (`MockLanguageModelV3` from `ai/test`) that calls the tools, which pay through a real
 * gateway (SQLite) to a local 402 merchant. What the model is given back is read from the
 * prompts the mock received: the merchant's paid answer, the spend, a refusal past the ceiling.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { generateText, stepCountIs } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { ConfigError, ctlAiTools } from '../../agent-tools/ai.js';
import { call, createSession, useGatewayAndMerchant } from '../gateway/helpers.js';

const PRICES: Record<string, string> = { '/report': '250', '/big': '5000' };
const env = useGatewayAndMerchant(test, { amount: (path) => PRICES[path] ?? '100' });

type GenerateResult = Awaited<ReturnType<MockLanguageModelV3['doGenerate']>>;
type Prompt = MockLanguageModelV3['doGenerateCalls'][number]['prompt'];

const usage: GenerateResult['usage'] = {
  inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 5, text: 5, reasoning: undefined },
};

/** One model step that calls `toolName` with `input`. */
function callsTool(id: string, toolName: string, input: Record<string, unknown>): GenerateResult {
  return {
    content: [{ type: 'tool-call', toolCallId: id, toolName, input: JSON.stringify(input) }],
    finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
    usage,
    warnings: [],
  };
}

function says(text: string): GenerateResult {
  return { content: [{ type: 'text', text }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] };
}

/** The tool result for `toolCallId` in a prompt the model received: what the model was shown. */
function shown(prompt: Prompt, toolCallId: string) {
  for (const m of prompt) {
    if (m.role !== 'tool') continue;
    for (const part of m.content)
      if (part.type === 'tool-result' && part.toolCallId === toolCallId)
        return part.output as { type: string; value: any };
  }
  throw new Error(`the model was not shown a result for ${toolCallId}`);
}

async function ownerReceipts(sessionId: string) {
  return (await call(env.gw.url, 'GET', `/sessions/${sessionId}/receipts`, { key: env.gw.ownerKey })).body.receipts as {
    receiptId: string;
    amount: { amountMinor: string; currency: string };
  }[];
}

test('an agent turn: the model pays through the gateway, sees the spend, and is refused past the ceiling', async () => {
  const s = await createSession(env.gw);
  const paidBefore = env.merchant.paid.length;
  const model = new MockLanguageModelV3({
    doGenerate: [
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
  });
  const result = await generateText({
    model,
    tools: ctlAiTools({ gatewayUrl: env.gw.url, sessionToken: s.sessionToken }),
    stopWhen: stepCountIs(6),
    prompt: 'Get the tide report, then the big one.',
  });
  assert.is(result.text, 'The report is paid; the big one is over budget.');
  assert.is(result.steps.length, 4);

  // The model was offered the five tools with their JSON schemas.
  const offered = model.doGenerateCalls[0]!.tools ?? [];
  assert.equal(offered.map((t) => t.name).sort(), [
    'check_log',
    'delegate_budget',
    'list_receipts',
    'paid_fetch',
    'session_status',
  ]);
  const fetchTool = offered.find((t) => t.name === 'paid_fetch') as { inputSchema: any; description?: string };
  assert.equal(fetchTool.inputSchema.required, ['url']);
  assert.is(fetchTool.inputSchema.properties.url.format, 'uri');
  assert.match(fetchTool.description ?? '', /402/);

  // Step 2 saw the merchant's paid answer, with the gateway's receipt.
  const paid = shown(model.doGenerateCalls[1]!.prompt, 'c1');
  assert.is(paid.type, 'json');
  assert.is(paid.value.outcome, 'response');
  assert.is(paid.value.status, 200);
  const body = JSON.parse(paid.value.body);
  assert.is(body.paid, true);
  assert.is(body.body, '{"q":"tides"}', 'the request body reached the merchant');
  assert.equal(paid.value.amountPaid, { amountMinor: '250', currency: 'USD' });
  assert.match(paid.value.idempotencyKey, /^ai_/);
  const receipts = await ownerReceipts(s.sessionId);
  assert.equal(
    receipts.map((r) => r.receiptId),
    [paid.value.receiptId],
    "the receipt is the gateway's own record",
  );

  // Step 3 saw the spend.
  const status = shown(model.doGenerateCalls[2]!.prompt, 'c2');
  assert.is(status.type, 'json');
  assert.is(status.value.sessionId, s.sessionId);
  assert.is(status.value.spentMinor, '250');
  assert.is(status.value.remainingMinor, '750');

  // Step 4 saw the refusal as a tool error with its §9 code; nothing more was paid.
  const refused = shown(model.doGenerateCalls[3]!.prompt, 'c3');
  assert.is(refused.type, 'error-json');
  assert.is(refused.value.outcome, 'refused');
  assert.is(refused.value.code, 'budget_exceeded');
  assert.match(refused.value.nextStep, /do not retry/);
  assert.is(env.merchant.paid.length, paidBefore + 1);
  assert.is((await ownerReceipts(s.sessionId)).length, 1);
  // The application reads the same answers from the steps.
  const outputs = result.steps.flatMap((st) => st.toolResults.map((r) => r.output as { code?: string }));
  assert.is(outputs.at(-1)!.code, 'budget_exceeded');
});

test('a paused session is an ordinary output telling the model to ask the budget owner', async () => {
  const s = await createSession(env.gw, { budget: { amount: '200', currency: 'USD' }, softLimit: { amount: '100' } });
  const model = new MockLanguageModelV3({
    doGenerate: [
      callsTool('p1', 'paid_fetch', { url: `${env.merchant.url}/data`, purpose: 'api:search' }),
      callsTool('p2', 'paid_fetch', { url: `${env.merchant.url}/data`, purpose: 'api:search' }),
      callsTool('p3', 'paid_fetch', { url: `${env.merchant.url}/data`, purpose: 'api:search' }),
      says('I asked the owner.'),
    ],
  });
  await generateText({
    model,
    tools: ctlAiTools({ gatewayUrl: env.gw.url, sessionToken: s.sessionToken, tools: ['paid_fetch'] }),
    stopWhen: stepCountIs(6),
    prompt: 'Fetch the data three times.',
  });
  assert.equal(
    model.doGenerateCalls[0]!.tools?.map((t) => t.name),
    ['paid_fetch'],
  );
  const paused = shown(model.doGenerateCalls[3]!.prompt, 'p3');
  assert.is(paused.type, 'json');
  assert.is(paused.value.outcome, 'paused');
  assert.ok(paused.value.ownerAction.includes(`PATCH ${env.gw.url}/sessions/${s.sessionId}`), paused.value.ownerAction);
});

test('delegate_budget: the model hands a sub-agent a child token whose tools see only its slice', async () => {
  const s = await createSession(env.gw);
  const model = new MockLanguageModelV3({
    doGenerate: [
      callsTool('d1', 'delegate_budget', { amountMinor: '150', durationSeconds: 300, label: 'train' }),
      says('Delegated.'),
    ],
  });
  await generateText({
    model,
    tools: ctlAiTools({ gatewayUrl: env.gw.url, sessionToken: s.sessionToken }),
    stopWhen: stepCountIs(3),
    prompt: 'Give the train sub-agent 1.50.',
  });
  const d = shown(model.doGenerateCalls[1]!.prompt, 'd1');
  assert.is(d.type, 'json');
  assert.equal([d.value.outcome, d.value.parentId, d.value.budgetMinor], ['delegated', s.sessionId, '150']);
  // The sub-agent's own tools, with the child token: its slice, not the parent's budget.
  const sub = ctlAiTools({ gatewayUrl: env.gw.url, sessionToken: d.value.sessionToken, tools: ['session_status'] });
  const st = (await sub.session_status!.execute!({}, { toolCallId: 's1', messages: [] })) as Record<string, any>;
  assert.equal([st.sessionId, st.budgetMinor, st.parentId], [d.value.sessionId, '150', s.sessionId]);
});

test('a bad gateway URL, token, tool name or log key is refused when the tools are made, naming the option', () => {
  const token = 'gw_sess_' + 'A'.repeat(43);
  const bad: [Parameters<typeof ctlAiTools>[0], RegExp][] = [
    [{ gatewayUrl: 'http://gateway.example.com', sessionToken: token }, /^gatewayUrl: must be https/],
    [{ gatewayUrl: env.gw.url, sessionToken: 'sk-secret-value-123' }, /^sessionToken: not a session token/],
    [{ gatewayUrl: env.gw.url, sessionToken: token, tools: ['pay_everything' as 'paid_fetch'] }, /pay_everything/],
    [{ gatewayUrl: env.gw.url, sessionToken: token, logVkey: 'log+0000+AAAA' }, /^logVkey: not a log verifier key/],
  ];
  for (const [options, message] of bad) {
    try {
      ctlAiTools(options);
      assert.unreachable(JSON.stringify(options));
    } catch (e) {
      assert.ok(e instanceof ConfigError || e instanceof RangeError, String(e));
      assert.match((e as Error).message, message);
      assert.not.ok((e as Error).message.includes('sk-secret-value-123'), 'no token in the message');
    }
  }
});

test.run();
