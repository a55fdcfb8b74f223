// One Anthropic Messages exchange through the relay with the official
// @anthropic-ai/sdk, reported as ONE JSON line on stdout.
// anthropic_node_e2e_test.go runs it; by hand, against a running relay:
//
//   node e2e/node/messages.mjs <base_url> <api_key> <model> <call> [<flags>]
//
//   base_url  the relay's root, e.g. http://127.0.0.1:9080 (the SDK adds /v1/messages)
//   call      create   messages.create, not streaming
//             stream   messages.stream: text and thinking events, then finalMessage()
//             tools    a tool-use round trip: tool_choice any forces get_weather,
//                      its tool_result goes back, the text answer is reported
//             count    messages.countTokens
//   flags     comma-separated: thinking (thinking enabled, budget 1024),
//             stream (tools: both turns streamed)
//
// Success prints, for create and stream,
//   {"text":"...","thinking":"...","signature":"...","stop_reason":"end_turn",
//    "text_events":N,"events_text":"...","thinking_events":N,"events_thinking":"...",
//    "usage":{...}}
// (the *_events fields for stream only: what the SDK's event callbacks saw);
// for tools {"tool_use":{"id","name","input"},"first_stop":"tool_use",
// "text":"...","stop_reason":"end_turn"}; for count {"input_tokens":N}.
//
// An error (an HTTP error status, or an error event inside the stream)
// prints {"error":{"status":...,"type":...,"name":...,"message":...,
// "api_error":true|false}} plus what arrived before it, and exits 2. Bad
// usage exits 64.

import Anthropic from '@anthropic-ai/sdk';

const [baseURL, apiKey, model, call, flagArg = ''] = process.argv.slice(2);
const flags = new Set(flagArg.split(',').filter(Boolean));

if (!baseURL || !apiKey || !model || !['create', 'stream', 'tools', 'count'].includes(call)) {
  process.stderr.write('usage: node messages.mjs <base_url> <api_key> <model> create|stream|tools|count [thinking,stream]\n');
  process.exit(64);
}

// Nothing from the environment: no ANTHROPIC_AUTH_TOKEN, no profile.
const client = new Anthropic({ baseURL, apiKey, authToken: null, maxRetries: 0, timeout: 30_000 });

const params = {
  model,
  max_tokens: 4096,
  messages: [{ role: 'user', content: 'Say something mixed: ASCII, 中文, emoji.' }],
};
if (flags.has('thinking')) params.thinking = { type: 'enabled', budget_tokens: 1024 };

const weatherTool = {
  name: 'get_weather',
  description: 'The weather in a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

const out = {};

function print(v) {
  process.stdout.write(JSON.stringify(v) + '\n');
}

// parts cuts a Message into what the test compares.
function parts(msg) {
  const p = { text: '', thinking: '', signature: '', stop_reason: msg.stop_reason, tool_uses: [] };
  for (const b of msg.content) {
    if (b.type === 'text') p.text += b.text;
    else if (b.type === 'thinking') {
      p.thinking += b.thinking;
      p.signature += b.signature ?? '';
    } else if (b.type === 'tool_use') p.tool_uses.push({ id: b.id, name: b.name, input: b.input });
  }
  p.usage = msg.usage ?? null;
  return p;
}

async function streamed(p) {
  const s = client.messages.stream(p);
  out.text_events = 0;
  out.events_text = '';
  out.thinking_events = 0;
  out.events_thinking = '';
  s.on('text', (delta) => {
    out.text_events++;
    out.events_text += delta;
  });
  s.on('thinking', (delta) => {
    out.thinking_events++;
    out.events_thinking += delta;
  });
  return await s.finalMessage();
}

async function send(p, stream) {
  return stream ? await streamed(p) : await client.messages.create(p);
}

try {
  switch (call) {
    case 'create':
      Object.assign(out, parts(await client.messages.create(params)));
      break;
    case 'stream':
      Object.assign(out, parts(await streamed(params)));
      break;
    case 'tools': {
      const stream = flags.has('stream');
      const first = {
        ...params,
        messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
        tools: [weatherTool],
        tool_choice: { type: 'any' },
      };
      const m1 = await send(first, stream);
      const p1 = parts(m1);
      out.first_stop = p1.stop_reason;
      out.tool_use = p1.tool_uses[0] ?? null;
      if (!out.tool_use) break;
      const second = {
        ...first,
        tool_choice: { type: 'auto' },
        messages: [
          ...first.messages,
          { role: 'assistant', content: m1.content },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: out.tool_use.id, content: '18°C and sunny' }] },
        ],
      };
      const p2 = parts(await send(second, stream));
      out.text = p2.text;
      out.stop_reason = p2.stop_reason;
      out.second_tool_uses = p2.tool_uses.length;
      break;
    }
    case 'count': {
      const r = await client.messages.countTokens({ model, messages: params.messages });
      out.input_tokens = r.input_tokens;
      break;
    }
  }
} catch (err) {
  const e = {
    status: err?.status ?? null,
    type: err?.type ?? err?.error?.error?.type ?? null,
    name: err?.constructor?.name ?? null,
    message: String(err?.message ?? err),
    api_error: err instanceof Anthropic.APIError,
  };
  print({ error: e, ...out });
  process.exit(2);
}

print(out);
