// One tool-calling exchange through the relay with an official Node SDK's
// own accumulator, reported as ONE JSON line on stdout.
// toolcalls_sdk_e2e_test.go runs it; by hand, against a running relay:
//
//   node e2e/node/toolcalls.mjs <base_url> <api_key> <model> messages|responses stream|create
//
//   base_url   the relay's root, e.g. http://127.0.0.1:9080
//   messages   @anthropic-ai/sdk: messages.stream(...).finalMessage(), or messages.create
//   responses  openai: responses.stream(...).finalResponse(), or responses.create
//
// Success prints {"text":"...","stop":"...","calls":[{"id","name","args"}]}:
// args is a Messages tool_use's input as JSON.stringify writes it, or a
// Responses function_call's arguments string as it came. An error prints
// {"error":{"name":...,"message":...}} and exits 2; bad usage exits 64.

import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';

const [baseURL, apiKey, model, api, mode] = process.argv.slice(2);
if (!baseURL || !apiKey || !model || !['messages', 'responses'].includes(api) || !['stream', 'create'].includes(mode)) {
  process.stderr.write('usage: node toolcalls.mjs <base_url> <api_key> <model> messages|responses stream|create\n');
  process.exit(64);
}

const tools = [
  ['get_weather', { city: { type: 'string' }, days: { type: 'integer' } }],
  ['get_time', { tz: { type: 'string' } }],
  ['now', {}],
];

function print(v) {
  process.stdout.write(JSON.stringify(v) + '\n');
}

try {
  if (api === 'messages') {
    // Nothing from the environment: no ANTHROPIC_AUTH_TOKEN, no profile.
    const client = new Anthropic({ baseURL, apiKey, authToken: null, maxRetries: 0, timeout: 30_000 });
    const params = {
      model,
      max_tokens: 1024,
      messages: [{ role: 'user', content: 'Weather and time in Paris?' }],
      tools: tools.map(([name, properties]) => ({ name, input_schema: { type: 'object', properties } })),
    };
    const msg = mode === 'stream' ? await client.messages.stream(params).finalMessage() : await client.messages.create(params);
    print({
      text: msg.content.filter((b) => b.type === 'text').map((b) => b.text).join(''),
      stop: msg.stop_reason,
      calls: msg.content.filter((b) => b.type === 'tool_use').map((b) => ({ id: b.id, name: b.name, args: JSON.stringify(b.input) })),
    });
  } else {
    const client = new OpenAI({ baseURL: baseURL + '/v1', apiKey, maxRetries: 0, timeout: 30_000 });
    const params = {
      model,
      input: 'Weather and time in Paris?',
      tools: tools.map(([name, properties]) => ({ type: 'function', name, parameters: { type: 'object', properties }, strict: false })),
    };
    const resp = mode === 'stream' ? await client.responses.stream(params).finalResponse() : await client.responses.create(params);
    print({
      text: resp.output_text,
      stop: resp.status,
      calls: resp.output.filter((i) => i.type === 'function_call').map((i) => ({ id: i.call_id, name: i.name, args: i.arguments })),
    });
  }
} catch (err) {
  print({ error: { name: err?.constructor?.name ?? null, message: String(err?.message ?? err) } });
  process.exit(2);
}
