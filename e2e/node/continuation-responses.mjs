// Continued Responses streams (issue 30) as the official openai npm client
// sees them: for each <model>:<mode>, the responses.stream helper through
// the relay, then finalResponse(), reported as ONE JSON line per spec on
// stdout. continuation_responses_e2e_test.go runs it; by hand:
//
//   node e2e/node/continuation-responses.mjs <base_url> <api_key> <model>:<mode>...
//
//   mode  text    input "hi" with reasoning (effort low, summary auto)
//         tools   the same with a get_weather function tool, tool_choice required
//
// Each line: {"model":...,"text":<finalResponse().output_text>,"deltas":<the
// output_text deltas joined>,"summary":<the reasoning summary deltas
// joined>,"reasoning":[[<summary texts of each reasoning item of the final
// output>]...],"calls":[{"id","call_id","name","arguments"}...],"status":...,
// "usage":{...}} or, when the SDK raised, {"model":...,"error":{"name","message"}}.

import OpenAI from 'openai';

const [baseURL, apiKey, ...specs] = process.argv.slice(2);
if (!baseURL || !apiKey || specs.length === 0) {
  process.stderr.write('usage: node continuation-responses.mjs <base_url> <api_key> <model>:text|tools...\n');
  process.exit(64);
}

const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 30_000 });
const weather = { type: 'function', name: 'get_weather', parameters: { type: 'object', properties: { input: { type: 'string' } } }, strict: false };

for (const spec of specs) {
  const i = spec.lastIndexOf(':');
  const model = spec.slice(0, i), mode = spec.slice(i + 1);
  const out = { model };
  try {
    const params = { model, input: 'hi', reasoning: { effort: 'low', summary: 'auto' } };
    if (mode === 'tools') Object.assign(params, { tools: [weather], tool_choice: 'required' });
    const s = client.responses.stream(params);
    let deltas = '', summary = '';
    s.on('response.output_text.delta', (ev) => { deltas += ev.delta; });
    s.on('response.reasoning_summary_text.delta', (ev) => { summary += ev.delta; });
    const r = await s.finalResponse();
    Object.assign(out, {
      text: r.output_text, deltas, summary, status: r.status, usage: r.usage ?? null,
      reasoning: r.output.filter((it) => it.type === 'reasoning').map((it) => (it.summary ?? []).map((p) => p.text)),
      calls: r.output.filter((it) => it.type === 'function_call').map((it) => ({ id: it.id, call_id: it.call_id, name: it.name, arguments: it.arguments })),
    });
  } catch (e) {
    out.error = { name: e.constructor?.name ?? '', message: String(e.message ?? e) };
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}
