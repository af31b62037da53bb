// The official MCP TypeScript SDK client, either line pinned in package.json: v1
// (@modelcontextprotocol/sdk, the default) or v2 (@modelcontextprotocol/client), driven line by
// line over stdin/stdout in JSON Lines by tests/support/ts_client.py.
//
// Usage: node client.mjs <url> [<tool> [<json-arguments>]] [--sdk v1|v2] [--request-timeout-ms N]
//        [--max-retries N] [--initial-reconnection-delay-ms N] [--max-reconnection-delay-ms N]
//
// Connects to <url> (an MCP streamable-HTTP endpoint on loopback; nothing else is contacted)
// with the line's `Client` + `StreamableHTTPClientTransport`, declaring the form elicitation
// capability (v2 with its default version negotiation, "legacy": the `initialize` handshake).
// Both lines speak the same protocol; only `LINES` below differs between them.
// With <tool>, calls it at once (call id "0") and exits once it ended. Every line it prints is one JSON object with
// an "event" field:
//   connected   {sdk, sessionId, protocolVersion}                 initialize done
//   presented   {n, requestId, sessionId, message, requestedSchema} EVERY elicitation the SDK
//               hands to the handler (n counts presentations from 1; replays included)
//   withdrawn   {n, requestId, reason}   the handler's abort signal fired (cancel or close)
//   answered    {n, requestId, action}   the handler returned the user's answer to the SDK
//   resumption  {callId, token}          onresumptiontoken: an SSE event id of a call's stream
//   http        {method, rpc, lastEventId, status | error}  every HTTP exchange (fetch wrapper)
//   diagnostic  {source: "onerror", message}                 the SDK's onerror reports
//   result      {id, result}                                 a call returned
//   error       {id, code, sdkCode, message, data}  a call failed (id null: connect); code is
//               the JSON-RPC code or null, sdkCode v2's string SdkErrorCode or null
//   closed      {}                                           the SDK's onclose
// Commands read from stdin, one JSON object a line:
//   {"answer": "accept"|"decline"|"cancel", "content": {...}, "n": 1}   answer presentation n
//        (without n: the oldest one still open)
//   {"call": "<tool>", "arguments": {...}, "id": "c1"}                  start another call
//   {"close": true}   (or end of stdin)                                close and exit 0
import { createInterface } from 'node:readline';

// What differs between the two SDK lines: where the classes are, how an elicitation handler
// is registered (v1: a schema and `extra`; v2: the method name and `ctx.mcpReq`), and
// `callTool`'s arguments (v1 takes a result schema before the options). A handler sees
// {requestId, sessionId, signal}.
const LINES = {
  v1: async () => {
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    const { ElicitRequestSchema } = await import('@modelcontextprotocol/sdk/types.js');
    return {
      Client,
      StreamableHTTPClientTransport,
      onElicit: (client, handler) =>
        client.setRequestHandler(ElicitRequestSchema, (request, extra) =>
          handler(request, { requestId: extra.requestId, sessionId: extra.sessionId, signal: extra.signal }),
        ),
      callTool: (client, params, options) => client.callTool(params, undefined, options),
    };
  },
  v2: async () => {
    const { Client, StreamableHTTPClientTransport } = await import('@modelcontextprotocol/client');
    return {
      Client,
      StreamableHTTPClientTransport,
      onElicit: (client, handler) =>
        client.setRequestHandler('elicitation/create', (request, ctx) =>
          handler(request, { requestId: ctx.mcpReq.id, sessionId: ctx.sessionId, signal: ctx.mcpReq.signal }),
        ),
      callTool: (client, params, options) => client.callTool(params, options),
    };
  },
};

function emit(event, fields = {}) {
  process.stdout.write(JSON.stringify({ event, ...fields }) + '\n');
}

function parseArgs(argv) {
  const options = {
    requestTimeoutMs: 60000,
    maxRetries: 2,
    initialReconnectionDelayMs: 50,
    maxReconnectionDelayMs: 500,
  };
  const names = {
    '--request-timeout-ms': 'requestTimeoutMs',
    '--max-retries': 'maxRetries',
    '--initial-reconnection-delay-ms': 'initialReconnectionDelayMs',
    '--max-reconnection-delay-ms': 'maxReconnectionDelayMs',
  };
  const positional = [];
  let sdk = 'v1';
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--sdk') {
      sdk = argv[++i];
      if (!(sdk in LINES)) throw new Error(`--sdk takes ${Object.keys(LINES).join(' or ')}`);
      continue;
    }
    const key = names[argv[i]];
    if (key === undefined) {
      positional.push(argv[i]);
      continue;
    }
    const value = Number(argv[++i]);
    if (!Number.isFinite(value) || value < 0) {
      throw new Error(`${argv[i - 1]} needs a non-negative number`);
    }
    options[key] = value;
  }
  const [url, tool, json] = positional;
  if (!url) {
    throw new Error('usage: node client.mjs <url> [<tool> [<json-arguments>]] [options]');
  }
  const parsed = new URL(url);
  if (!['127.0.0.1', 'localhost', '[::1]'].includes(parsed.hostname)) {
    throw new Error(`loopback URLs only: ${url}`);
  }
  return { url: parsed, tool, arguments: json ? JSON.parse(json) : {}, options, sdk };
}

function rpcKind(body) {
  if (typeof body !== 'string') return undefined;
  try {
    const msg = JSON.parse(body);
    if (msg && typeof msg === 'object' && !Array.isArray(msg)) {
      if (typeof msg.method === 'string') return msg.method;
      if ('result' in msg || 'error' in msg) return 'answer';
    }
  } catch {
    return undefined;
  }
  return undefined;
}

// The transport's fetch: the global fetch, reporting each exchange (answer POST statuses and
// resume GETs are otherwise invisible to the caller of the SDK).
function reportingFetch(input, init = {}) {
  const headers = new Headers(init.headers);
  const fields = {
    method: init.method ?? 'GET',
    rpc: rpcKind(init.body),
    lastEventId: headers.get('last-event-id') ?? undefined,
  };
  return fetch(input, init).then(
    (response) => {
      emit('http', { ...fields, status: response.status });
      return response;
    },
    (error) => {
      emit('http', { ...fields, error: String(error?.cause ?? error) });
      throw error;
    },
  );
}

function errorFields(error) {
  return {
    code: Number.isSafeInteger(error?.code) ? error.code : null,
    sdkCode: typeof error?.code === 'string' ? error.code : null,
    message: error?.message ?? String(error),
    data: error?.data ?? null,
  };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const sdk = await LINES[args.sdk]();
  const transport = new sdk.StreamableHTTPClientTransport(args.url, {
    fetch: reportingFetch,
    reconnectionOptions: {
      initialReconnectionDelay: args.options.initialReconnectionDelayMs,
      maxReconnectionDelay: args.options.maxReconnectionDelayMs,
      reconnectionDelayGrowFactor: 1.5,
      maxRetries: args.options.maxRetries,
    },
  });
  const client = new sdk.Client(
    { name: 'fsm-ts-client', version: '0.0.0' },
    { capabilities: { elicitation: { form: {} } } },
  );
  client.onerror = (error) => emit('diagnostic', { source: 'onerror', message: String(error?.message ?? error) });
  client.onclose = () => emit('closed');

  const open = []; // presentations waiting for an answer, oldest first
  let presented = 0;
  sdk.onElicit(client, (request, extra) => {
    const n = ++presented;
    emit('presented', {
      n,
      requestId: extra.requestId,
      sessionId: extra.sessionId ?? transport.sessionId ?? null,
      message: request.params.message,
      requestedSchema: request.params.requestedSchema ?? null,
    });
    return new Promise((resolve, reject) => {
      const item = { n, resolve };
      open.push(item);
      extra.signal.addEventListener('abort', () => {
        const i = open.indexOf(item);
        if (i >= 0) open.splice(i, 1);
        emit('withdrawn', { n, requestId: extra.requestId, reason: String(extra.signal.reason ?? '') });
        reject(new Error('withdrawn'));
      });
    }).then((answer) => {
      emit('answered', { n, requestId: extra.requestId, action: answer.action });
      return answer;
    });
  });

  try {
    await client.connect(transport, { timeout: args.options.requestTimeoutMs });
  } catch (error) {
    emit('error', { id: null, ...errorFields(error) });
    await transport.close().catch(() => {});
    process.exit(2);
  }
  emit('connected', { sdk: args.sdk, sessionId: transport.sessionId ?? null, protocolVersion: transport.protocolVersion ?? null });

  const calls = new Set();
  function call(id, name, toolArgs) {
    const done = sdk
      .callTool(client, { name, arguments: toolArgs }, {
        timeout: args.options.requestTimeoutMs,
        onresumptiontoken: (token) => emit('resumption', { callId: id, token }),
      })
      .then(
        (result) => emit('result', { id, result }),
        (error) => emit('error', { id, ...errorFields(error) }),
      );
    calls.add(done);
    done.finally(() => calls.delete(done));
  }

  // Closing aborts every open handler (the SDK's onclose): each prints `withdrawn`.
  async function close() {
    await client.close().catch((error) => emit('diagnostic', { source: 'close', message: String(error) }));
    process.exit(0);
  }

  if (args.tool) {
    call('0', args.tool, args.arguments);
    // the call named on the command line is the run: once it ended, close and exit
    Promise.all([...calls]).then(() => close());
  }

  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  lines.on('line', (line) => {
    if (!line.trim()) return;
    let cmd;
    try {
      cmd = JSON.parse(line);
    } catch {
      emit('diagnostic', { source: 'stdin', message: `not JSON: ${line}` });
      return;
    }
    if (cmd.close) {
      void close();
    } else if (typeof cmd.call === 'string') {
      call(String(cmd.id ?? cmd.call), cmd.call, cmd.arguments ?? {});
    } else if (['accept', 'decline', 'cancel'].includes(cmd.answer)) {
      const i = cmd.n === undefined ? 0 : open.findIndex((item) => item.n === cmd.n);
      const item = i >= 0 ? open.splice(i, 1)[0] : undefined;
      if (item === undefined) {
        emit('diagnostic', { source: 'stdin', message: `no open presentation ${cmd.n ?? ''}`.trim() });
        return;
      }
      item.resolve(cmd.answer === 'accept' ? { action: 'accept', content: cmd.content ?? {} } : { action: cmd.answer });
    } else {
      emit('diagnostic', { source: 'stdin', message: `unknown command: ${line}` });
    }
  });
  lines.on('close', () => void close());
}

main().catch((error) => {
  emit('error', { id: null, ...errorFields(error) });
  process.exit(2);
});
