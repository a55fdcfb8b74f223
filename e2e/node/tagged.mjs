// One exchange through the relay with the official openai npm client, for
// a model that writes its reasoning inline between <think> tags (issue 27):
// what the client reads as reasoning and as the answer, reported as ONE
// JSON line on stdout. inlinereasoning_clients_e2e_test.go runs it; by
// hand, against a running relay:
//
//   node e2e/node/tagged.mjs <base_url> <api_key> <model> <call>
//
//   base_url  the relay's /v1, e.g. http://127.0.0.1:9080/v1
//   call      chat-create       chat.completions.create, not streaming
//             chat-stream       chat.completions.create with stream: true, chunk by chunk
//             chat-helper       the chat.completions.stream helper: chunk and
//                               content.delta events, then finalChatCompletion()
//             responses-create  responses.create, not streaming
//             responses-stream  the responses.stream helper: reasoning summary and
//                               text delta events, then finalResponse()
//
// Success prints, for the chat calls,
//   {"reasoning_content":"...","reasoning":"...","has_reasoning_content":bool,
//    "has_reasoning":bool,"content":"...","finish_reason":"stop","chunks":N}
// (has_*: the member was there at all, in the message or in any delta;
// chat-helper: the reasoning of the chunk events, the content of
// finalChatCompletion(), and "events_content", the content.delta events'
// text), and
// for the responses calls
//   {"items":["reasoning","message"],"summary":"...","text":"...","output_text":"...",
//    "events_summary":"...","summary_events":N,"events_text":"...","text_events":N}
// (events_*: responses-stream only). An error prints
// {"error":{"status":...,"name":...,"message":...}} and exits 2; bad usage
// exits 64.

import OpenAI from 'openai';

const calls = ['chat-create', 'chat-stream', 'chat-helper', 'responses-create', 'responses-stream'];
const [baseURL, apiKey, model, call] = process.argv.slice(2);
if (!baseURL || !apiKey || !model || !calls.includes(call)) {
  process.stderr.write(`usage: node tagged.mjs <base_url> <api_key> <model> ${calls.join('|')}\n`);
  process.exit(64);
}

// Nothing from the environment: no OPENAI_ORG_ID, no project.
const client = new OpenAI({ baseURL, apiKey, organization: null, project: null, maxRetries: 0, timeout: 30_000 });
const messages = [{ role: 'user', content: 'Say something mixed: ASCII, 中文, emoji.' }];
const out = {};

// reasoningOf adds the reasoning members of a message or delta m to out.
function reasoningOf(m) {
  for (const [key, has] of [['reasoning_content', 'has_reasoning_content'], ['reasoning', 'has_reasoning']]) {
    if (typeof m?.[key] === 'string') {
      out[key] = (out[key] ?? '') + m[key];
      out[has] = true;
    }
  }
}

// responseParts reports a Response's output items and their texts.
function responseParts(r) {
  out.items = r.output.map((it) => it.type);
  out.summary = r.output.filter((it) => it.type === 'reasoning').flatMap((it) => it.summary ?? []).map((s) => s.text).join('');
  out.text = r.output.filter((it) => it.type === 'message').flatMap((it) => it.content).map((c) => c.text ?? '').join('');
  out.output_text = r.output_text;
}

try {
  switch (call) {
    case 'chat-create': {
      const res = await client.chat.completions.create({ model, messages });
      const choice = res.choices[0];
      reasoningOf(choice.message);
      Object.assign(out, { content: choice.message.content ?? '', finish_reason: choice.finish_reason, chunks: 0 });
      break;
    }
    case 'chat-stream': {
      const s = await client.chat.completions.create({ model, messages, stream: true });
      Object.assign(out, { content: '', finish_reason: null, chunks: 0 });
      for await (const chunk of s) {
        out.chunks++;
        const choice = chunk.choices?.[0];
        if (!choice) continue;
        reasoningOf(choice.delta);
        out.content += choice.delta?.content ?? '';
        if (choice.finish_reason) out.finish_reason = choice.finish_reason;
      }
      break;
    }
    case 'chat-helper': {
      const s = client.chat.completions.stream({ model, messages });
      out.events_content = '';
      out.chunks = 0;
      // The helper's accumulated message keeps only the last delta's value
      // of a member it does not know (Object.assign in
      // ChatCompletionStream): the reasoning is read from the chunks.
      s.on('chunk', (chunk) => {
        out.chunks++;
        reasoningOf(chunk.choices?.[0]?.delta);
      });
      s.on('content.delta', (ev) => { out.events_content += ev.delta; });
      const res = await s.finalChatCompletion();
      const choice = res.choices[0];
      Object.assign(out, { content: choice.message.content ?? '', finish_reason: choice.finish_reason });
      break;
    }
    case 'responses-create': {
      responseParts(await client.responses.create({ model, input: 'hi' }));
      break;
    }
    case 'responses-stream': {
      const s = client.responses.stream({ model, input: 'hi' });
      Object.assign(out, { events_summary: '', summary_events: 0, events_text: '', text_events: 0 });
      s.on('response.reasoning_summary_text.delta', (ev) => { out.events_summary += ev.delta; out.summary_events++; });
      s.on('response.output_text.delta', (ev) => { out.events_text += ev.delta; out.text_events++; });
      responseParts(await s.finalResponse());
      break;
    }
  }
  process.stdout.write(JSON.stringify(out) + '\n');
} catch (e) {
  out.error = { status: e.status ?? 0, name: e.constructor?.name ?? '', message: String(e.message ?? e) };
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(2);
}
