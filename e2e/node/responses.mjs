// One OpenAI Responses exchange through the relay with the official openai
// npm client, reported as ONE JSON line on stdout. responses_node_e2e_test.go
// runs it; by hand, against a running relay:
//
//   node e2e/node/responses.mjs <base_url> <api_key> <model> <call>
//
//   base_url  the relay's /v1, e.g. http://127.0.0.1:9080/v1
//   call      create   responses.create, not streaming
//             events   responses.create with stream: true, iterating the events
//             stream   the responses.stream helper: text events, then finalResponse()
//             tools    a function call round trip: tool_choice required, then
//                      its function_call_output, then the text answer
//
// Success prints {"text":"...","status":"completed","output_tokens":N,
// "events":N} (events: the text delta events seen, for events and stream;
// for tools also "call":{"name","arguments"}). An error prints
// {"error":{"status":...,"name":...,"message":...}} and exits 2.

import OpenAI from 'openai';

const [baseURL, apiKey, model, call] = process.argv.slice(2);
if (!baseURL || !apiKey || !model || !['create', 'events', 'stream', 'tools'].includes(call)) {
  process.stderr.write('usage: node responses.mjs <base_url> <api_key> <model> create|events|stream|tools\n');
  process.exit(64);
}

const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 30_000 });
const out = {};
const weather = { type: 'function', name: 'get_weather', parameters: { type: 'object', properties: { input: { type: 'string' } } }, strict: false };

try {
  if (call === 'create') {
    const r = await client.responses.create({ model, input: 'hi' });
    Object.assign(out, { text: r.output_text, status: r.status, output_tokens: r.usage?.output_tokens ?? 0 });
  } else if (call === 'events') {
    const s = await client.responses.create({ model, input: 'hi', stream: true });
    let text = '', events = 0, status = '', tokens = 0;
    for await (const ev of s) {
      if (ev.type === 'response.output_text.delta') { text += ev.delta; events++; }
      if (ev.type === 'response.completed') { status = ev.response.status; tokens = ev.response.usage?.output_tokens ?? 0; }
    }
    Object.assign(out, { text, status, output_tokens: tokens, events });
  } else if (call === 'stream') {
    const s = client.responses.stream({ model, input: 'hi' });
    let events = 0, deltas = '';
    s.on('response.output_text.delta', (ev) => { events++; deltas += ev.delta; });
    const r = await s.finalResponse();
    if (deltas !== r.output_text) throw new Error(`deltas ${JSON.stringify(deltas)} differ from the final text ${JSON.stringify(r.output_text)}`);
    Object.assign(out, { text: r.output_text, status: r.status, output_tokens: r.usage?.output_tokens ?? 0, events });
  } else {
    const first = await client.responses.create({ model, input: 'weather?', tools: [weather], tool_choice: 'required' });
    const fc = first.output.find((it) => it.type === 'function_call');
    if (!fc) throw new Error('no function_call in ' + JSON.stringify(first.output));
    out.call = { name: fc.name, arguments: fc.arguments };
    const second = await client.responses.create({
      model, tools: [weather],
      input: [{ role: 'user', content: 'weather?' }, fc, { type: 'function_call_output', call_id: fc.call_id, output: 'sunny' }],
    });
    Object.assign(out, { text: second.output_text, status: second.status, output_tokens: second.usage?.output_tokens ?? 0 });
  }
  process.stdout.write(JSON.stringify(out) + '\n');
} catch (e) {
  out.error = { status: e.status ?? 0, name: e.constructor?.name ?? '', message: String(e.message ?? e) };
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(2);
}
