// A Node client that copied a Python sample: the Python SDK's extra_body
// argument, written literally into the create() params (the Node SDK has
// no such option, and sends every param it does not know in the body).
// knobs_e2e_test.go runs it:
//
//   node e2e/node/extrabody.mjs <base_url> <api_key> <model> [chat|responses]
//
// It streams one answer with
//   extra_body: {reasoning_dispersion: true, relay: {split_ratio: 0.35}}
// and prints ONE JSON line: {"reasoning":...,"content":...,"events":N}, or
// {"error":{"status","code","message"}} with exit status 2.

import OpenAI from 'openai';

const [baseURL, apiKey, model, api = 'chat'] = process.argv.slice(2);
if (!baseURL || !apiKey || !model || !['chat', 'responses'].includes(api)) {
  process.stderr.write('usage: node extrabody.mjs <base_url> <api_key> <model> [chat|responses]\n');
  process.exit(64);
}

const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 30_000 });
// As the Python sample has it: extra_body={"reasoning_dispersion": True, ...}
const extra_body = { reasoning_dispersion: true, relay: { split_ratio: 0.35 } };
const out = { reasoning: '', content: '', events: 0 };

try {
  if (api === 'chat') {
    const stream = await client.chat.completions.create({
      model,
      stream: true,
      messages: [{ role: 'user', content: 'Think, then answer.' }],
      extra_body,
    });
    for await (const chunk of stream) {
      out.events++;
      const delta = chunk.choices[0]?.delta ?? {};
      out.reasoning += delta.reasoning_content ?? '';
      out.content += delta.content ?? '';
    }
  } else {
    const stream = await client.responses.create({
      model,
      stream: true,
      input: 'Think, then answer.',
      extra_body,
    });
    for await (const ev of stream) {
      out.events++;
      if (ev.type === 'response.output_text.delta') out.content += ev.delta;
      if (ev.type === 'response.reasoning_text.delta' || ev.type === 'response.reasoning_summary_text.delta') out.reasoning += ev.delta;
    }
  }
  process.stdout.write(JSON.stringify(out) + '\n');
} catch (e) {
  process.stdout.write(JSON.stringify({ error: { status: e.status ?? null, code: e.code ?? null, message: String(e.message ?? e) } }) + '\n');
  process.exit(2);
}
