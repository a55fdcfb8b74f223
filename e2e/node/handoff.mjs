// One exchange with a hand-off alias (issue 28: reasoning from one model,
// the answer from another) through the official Node clients, reported as
// ONE JSON line on stdout: what the client read as reasoning and as the
// answer, and what a client holds the one response to (ids, model names,
// role deltas, the order of the parts). handoff_clients_e2e_test.go runs
// it; by hand, against a running relay:
//
//   node e2e/node/handoff.mjs <base_url> <api_key> <model> <call>
//
//   base_url  the relay's root, e.g. http://127.0.0.1:9080 (each client adds /v1)
//   call      chat-create       openai: chat.completions.create, not streaming
//             chat-stream       openai: chat.completions.create with stream: true, chunk by chunk
//             chat-helper       openai: the chat.completions.stream helper, then finalChatCompletion()
//             responses-create  openai: responses.create, not streaming
//             responses-stream  openai: the responses.stream helper, then finalResponse()
//             messages-create   @anthropic-ai/sdk: messages.create, not streaming
//             messages-stream   @anthropic-ai/sdk: messages.stream, then finalMessage()
//
// Success prints
//   {"reasoning":"...","answer":"...","finish":"...","model":"...",
//    "ids":[...],"models":[...],"parts":[...],"roles":N,"chunks":N,
//    "events_reasoning":"...","events_answer":"...","signature":"...","usage":{...}}
// reasoning: reasoning_content (Chat), the reasoning items' summaries
// (Responses), the thinking blocks (Messages); answer: content, the
// message's text, the text blocks. ids and models: every distinct id and
// model the response's chunks or events named (one each for one response).
// parts: the kinds of the output in order ("reasoning", "answer",
// "tool"), runs collapsed: the chunks' deltas, the output items, the
// content blocks. roles: deltas that carried a role (chat-stream).
// events_*: what the stream helpers' delta events added up to. An error
// prints {"error":{"status":...,"name":...,"message":...}} and exits 2;
// bad usage exits 64.

import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const calls = ['chat-create', 'chat-stream', 'chat-helper', 'responses-create', 'responses-stream', 'messages-create', 'messages-stream'];
const [baseURL, apiKey, model, call] = process.argv.slice(2);
if (!baseURL || !apiKey || !model || !calls.includes(call)) {
  process.stderr.write(`usage: node handoff.mjs <base_url> <api_key> <model> ${calls.join('|')}\n`);
  process.exit(64);
}

// Nothing from the environment: no OPENAI_ORG_ID, no ANTHROPIC_AUTH_TOKEN.
const openai = new OpenAI({ baseURL: baseURL + '/v1', apiKey, organization: null, project: null, maxRetries: 0, timeout: 30_000 });
const anthropic = new Anthropic({ baseURL, apiKey, authToken: null, maxRetries: 0, timeout: 30_000 });
const prompt = 'Plan, then answer: ASCII, 中文, emoji.';
const out = { reasoning: '', answer: '', ids: [], models: [], parts: [], roles: 0, chunks: 0 };

function seen(list, v) {
  if (v !== undefined && v !== null && !list.includes(v)) list.push(v);
}

// part records the kind of the next piece of output, runs collapsed.
function part(kind) {
  if (out.parts[out.parts.length - 1] !== kind) out.parts.push(kind);
}

// chatMessage reads a Chat message or delta m.
function chatMessage(m) {
  if (!m) return;
  if (m.role) out.roles++;
  if (typeof m.reasoning_content === 'string' && m.reasoning_content !== '') {
    out.reasoning += m.reasoning_content;
    part('reasoning');
  }
  if (typeof m.content === 'string' && m.content !== '') {
    out.answer += m.content;
    part('answer');
  }
  if (m.tool_calls?.length) part('tool');
}

function chatChunk(chunk) {
  out.chunks++;
  seen(out.ids, chunk.id);
  seen(out.models, chunk.model);
  const choice = chunk.choices?.[0];
  if (!choice) return;
  chatMessage(choice.delta);
  if (choice.finish_reason) out.finish = choice.finish_reason;
}

function response(r) {
  seen(out.ids, r.id);
  seen(out.models, r.model);
  out.model = r.model;
  out.finish = r.status;
  out.usage = r.usage ?? null;
  for (const it of r.output) {
    if (it.type === 'reasoning') {
      out.reasoning += (it.summary ?? []).map((s) => s.text).join('');
      part('reasoning');
    } else if (it.type === 'message') {
      out.answer += it.content.map((c) => c.text ?? '').join('');
      part('answer');
    } else part(it.type);
  }
}

function message(m) {
  seen(out.ids, m.id);
  seen(out.models, m.model);
  out.model = m.model;
  out.finish = m.stop_reason;
  out.usage = m.usage ?? null;
  out.signature = '';
  for (const b of m.content) {
    if (b.type === 'thinking') {
      out.reasoning += b.thinking;
      out.signature += b.signature ?? '';
      part('reasoning');
    } else if (b.type === 'text') {
      out.answer += b.text;
      part('answer');
    } else part(b.type);
  }
}

try {
  switch (call) {
    case 'chat-create': {
      const res = await openai.chat.completions.create({ model, messages: [{ role: 'user', content: prompt }] });
      seen(out.ids, res.id);
      seen(out.models, res.model);
      out.model = res.model;
      chatMessage(res.choices[0].message);
      out.finish = res.choices[0].finish_reason;
      out.usage = res.usage ?? null;
      break;
    }
    case 'chat-stream': {
      const s = await openai.chat.completions.create({
        model, messages: [{ role: 'user', content: prompt }], stream: true, stream_options: { include_usage: true },
      });
      for await (const chunk of s) {
        chatChunk(chunk);
        if (chunk.usage) out.usage = chunk.usage;
      }
      out.model = out.models[0];
      break;
    }
    case 'chat-helper': {
      const s = openai.chat.completions.stream({ model, messages: [{ role: 'user', content: prompt }] });
      out.events_answer = '';
      // The helper keeps only the last delta's value of a member it does
      // not know (reasoning_content): the reasoning is read from the chunks.
      s.on('chunk', chatChunk);
      s.on('content.delta', (ev) => { out.events_answer += ev.delta; });
      const res = await s.finalChatCompletion();
      out.model = res.model;
      out.answer = res.choices[0].message.content ?? '';
      out.finish = res.choices[0].finish_reason;
      break;
    }
    case 'responses-create':
      response(await openai.responses.create({ model, input: prompt }));
      break;
    case 'responses-stream': {
      const s = openai.responses.stream({ model, input: prompt });
      Object.assign(out, { events_reasoning: '', events_answer: '' });
      s.on('event', (ev) => {
        out.chunks++;
        if (ev.response) seen(out.ids, ev.response.id);
      });
      s.on('response.reasoning_summary_text.delta', (ev) => { out.events_reasoning += ev.delta; });
      s.on('response.output_text.delta', (ev) => { out.events_answer += ev.delta; });
      response(await s.finalResponse());
      break;
    }
    case 'messages-create':
      message(await anthropic.messages.create({ model, max_tokens: 4096, messages: [{ role: 'user', content: prompt }] }));
      break;
    case 'messages-stream': {
      const s = anthropic.messages.stream({ model, max_tokens: 4096, messages: [{ role: 'user', content: prompt }] });
      Object.assign(out, { events_reasoning: '', events_answer: '' });
      s.on('streamEvent', (ev) => {
        out.chunks++;
        if (ev.type === 'message_start') {
          seen(out.ids, ev.message.id);
          seen(out.models, ev.message.model);
        }
      });
      s.on('thinking', (delta) => { out.events_reasoning += delta; });
      s.on('text', (delta) => { out.events_answer += delta; });
      const m = await s.finalMessage();
      // message() reads the final message's parts; the stream's order is
      // the blocks' order.
      out.reasoning = '';
      out.answer = '';
      out.parts = [];
      message(m);
      break;
    }
  }
  process.stdout.write(JSON.stringify(out) + '\n');
} catch (e) {
  out.error = { status: e.status ?? 0, name: e.constructor?.name ?? '', message: String(e.message ?? e) };
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(2);
}
