// The official tasks requester, @modelcontextprotocol/ext-tasks 0.2.2, on the TypeScript SDK
// v2 client (@modelcontextprotocol/client 2.4.0) pinned to protocol 2026-07-28, as its
// README wires it: createTaskSessionFromClient with rawDispatch and v2RequestFraming (the
// SDK client cannot send the tasks wire shapes itself). rawDispatch is one JSON-RPC POST
// with the 2026-07-28 headers (Mcp-Name: the task id for tasks/*, the tool for tools/call).
//
//   node requester.mjs <url> <tool> <arguments as JSON>
//
// Prints one JSON object a line on stdout:
//   {"event":"prompt","kind":...,"message":...,"taskId":...}  then waits for one line on
//       stdin: the answer's action ("accept", "decline" or "cancel")
//   {"event":"outcome","status":"completed"|"failed"|"cancelled","result":...,"error":...}
//   {"event":"error","error":...}                               the call threw
// and exits. Diagnostics go to stderr.
import { createInterface } from 'node:readline';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createTaskSessionFromClient } from '@modelcontextprotocol/ext-tasks/client';

const [url, tool, rawArgs] = process.argv.slice(2);
const VERSION = '2026-07-28';
const info = { name: 'fsm-ext-tasks', version: '0.0.0' };
const capabilities = { elicitation: { form: {} } };
const emit = (event, fields) => console.log(JSON.stringify({ event, ...fields }));

const stdin = createInterface({ input: process.stdin });
const lines = stdin[Symbol.asyncIterator]();

let ids = 0;
async function rawDispatch(request, options) {
  const body = { jsonrpc: '2.0', id: `r${++ids}`, ...request };
  const headers = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': VERSION,
    'mcp-method': body.method,
  };
  const name = body.params?.taskId ?? body.params?.name;
  if (typeof name === 'string') headers['mcp-name'] = name;
  const response = await fetch(url, {
    method: 'POST', headers, body: JSON.stringify(body), signal: options?.signal,
  });
  const text = await response.text();
  let message;
  if ((response.headers.get('content-type') || '').includes('text/event-stream')) {
    message = text.split(/\r?\n/).filter((l) => l.startsWith('data:'))
      .map((l) => JSON.parse(l.slice(5))).find((m) => m.id === body.id);
  } else {
    message = JSON.parse(text);
  }
  if (message === undefined) throw new Error(`no response to ${body.method} (HTTP ${response.status})`);
  return message.error ? { kind: 'error', error: message.error } : { kind: 'result', result: message.result };
}

const client = new Client(info, { capabilities, versionNegotiation: { mode: { pin: VERSION } } });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const session = createTaskSessionFromClient(client, {
  endpointId: 'fsm-ext-tasks',
  rawDispatch,
  v2RequestFraming: { protocolVersion: VERSION, clientInfo: info, clientCapabilities: capabilities },
  onInputRequest: async (request, context) => {
    emit('prompt', { kind: request.kind, message: request.params?.message ?? null, taskId: context.taskId ?? null });
    const next = await lines.next();
    const action = next.done ? 'cancel' : next.value.trim();
    return action === 'accept' ? { action, content: {} } : { action };
  },
});
try {
  const execution = await session.callTool(tool, JSON.parse(rawArgs || '{}'));
  const { outcome } = await execution.settle();
  emit('outcome', {
    status: outcome.status,
    result: outcome.status === 'completed' ? outcome.result : null,
    error: outcome.error ? `${outcome.error.name}: ${outcome.error.message}` : null,
  });
} catch (error) {
  emit('error', { error: `${error?.name}: ${error?.message}` });
} finally {
  await session.close();
  await client.close();
  stdin.close();
}
