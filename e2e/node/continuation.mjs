// Streams that the relay continued after their commit point (issue 30),
// read by the official Node SDKs' own accumulators: the openai SDK's
// chat.completions.stream() and finalChatCompletion(), and
// @anthropic-ai/sdk's messages.stream() and finalMessage().
// continuation_clients_e2e_test.go runs it; by hand, against a running
// relay:
//
//   node e2e/node/continuation.mjs <base_url> <api_key> <jobs>
//
//   base_url  the relay's root, e.g. http://127.0.0.1:9080
//   jobs      a JSON array of {"dialect":"chat"|"messages","model":"...",
//             "tools":true|false}, run one after the other
//
// It prints ONE JSON line: an array with one result per job, in order.
// A chat result:
//   {"text","reasoning","ids":[...],"tool_calls":[{"id","name","args"}],
//    "finish_reason","usage":{...},"error":null|{...}}
// where reasoning is the chunks' reasoning_content (or reasoning) joined
// and ids the distinct chunk ids. A messages result:
//   {"text","thinking","id","message_starts","events":[{"type","index"}],
//    "tool_uses":[{"id","name","args"}],"stop_reason","usage":{...},
//    "error":null|{...}}
// where events are the stream's events as the SDK yielded them. An error
// (an error status, an in-band error, an SDK complaint) fills error with
// {"name","status","type","message"}, the rest being what arrived before
// it. The exit status is 0 when every job was run (whatever its result),
// 64 on bad usage.

import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const [baseURL, apiKey, jobsArg] = process.argv.slice(2);
let jobs;
try {
  jobs = JSON.parse(jobsArg ?? '');
} catch {
  jobs = null;
}
if (!baseURL || !apiKey || !Array.isArray(jobs)) {
  process.stderr.write('usage: node continuation.mjs <base_url> <api_key> <jobs as a JSON array>\n');
  process.exit(64);
}

// Nothing from the environment, no retries: what the relay sent, once.
const openai = new OpenAI({ baseURL: baseURL + '/v1', apiKey, maxRetries: 0, timeout: 30_000 });
const anthropic = new Anthropic({ baseURL, apiKey, authToken: null, maxRetries: 0, timeout: 30_000 });

const prompt = 'Tell me about the weather in Paris.';

function errorOf(err) {
  return {
    name: err?.constructor?.name ?? null,
    status: err?.status ?? null,
    type: err?.type ?? err?.error?.type ?? err?.error?.error?.type ?? null,
    message: String(err?.message ?? err),
  };
}

async function chat(job) {
  const out = { text: '', reasoning: '', ids: [], tool_calls: [], finish_reason: null, usage: null, error: null };
  const ids = new Set();
  const params = {
    model: job.model,
    messages: [{ role: 'user', content: prompt }],
    reasoning_effort: 'low',
    stream_options: { include_usage: true },
  };
  if (job.tools) {
    params.tools = [{
      type: 'function',
      function: { name: 'get_weather', description: 'The weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
    }];
  }
  try {
    const s = openai.chat.completions.stream(params);
    s.on('chunk', (chunk) => {
      ids.add(chunk.id);
      const d = chunk.choices?.[0]?.delta;
      if (d) out.reasoning += d.reasoning_content ?? d.reasoning ?? '';
    });
    const c = await s.finalChatCompletion();
    const m = c.choices[0].message;
    out.text = m.content ?? '';
    out.tool_calls = (m.tool_calls ?? []).map((t) => ({ id: t.id, name: t.function.name, args: t.function.arguments }));
    out.finish_reason = c.choices[0].finish_reason;
    out.usage = c.usage ?? null;
  } catch (err) {
    out.error = errorOf(err);
  }
  out.ids = [...ids];
  return out;
}

async function messages(job) {
  const out = { text: '', thinking: '', id: null, message_starts: 0, events: [], tool_uses: [], stop_reason: null, usage: null, error: null };
  const params = {
    model: job.model,
    max_tokens: 4096,
    thinking: { type: 'enabled', budget_tokens: 1024 },
    messages: [{ role: 'user', content: prompt }],
  };
  if (job.tools) {
    params.tools = [{ name: 'get_weather', description: 'The weather in a city', input_schema: { type: 'object', properties: { city: { type: 'string' } } } }];
  }
  try {
    const s = anthropic.messages.stream(params);
    s.on('streamEvent', (ev) => {
      if (ev.type === 'message_start') out.message_starts++;
      out.events.push({ type: ev.type, index: ev.index ?? null });
    });
    const m = await s.finalMessage();
    out.id = m.id;
    for (const b of m.content) {
      if (b.type === 'text') out.text += b.text;
      else if (b.type === 'thinking') out.thinking += b.thinking;
      else if (b.type === 'tool_use') out.tool_uses.push({ id: b.id, name: b.name, args: JSON.stringify(b.input) });
    }
    out.stop_reason = m.stop_reason;
    out.usage = m.usage ?? null;
  } catch (err) {
    out.error = errorOf(err);
  }
  return out;
}

const results = [];
for (const job of jobs) {
  results.push(job.dialect === 'messages' ? await messages(job) : await chat(job));
}
process.stdout.write(JSON.stringify(results) + '\n');
