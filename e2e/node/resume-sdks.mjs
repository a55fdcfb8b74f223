// One streamed answer through the relay with an official Node SDK, the
// bytes it was sent kept beside what it parsed: the openai SDK's
// chat.completions.create({stream: true}) or the Anthropic SDK's
// messages.stream(). resume_clients_e2e_test.go runs it against a relay
// with resume on and heartbeats between the events, and checks the wire
// (ids, the retry hint, comment placement) on the raw bytes; by hand:
//
//   node e2e/node/resume-sdks.mjs <relay_root> <api_key> chat|messages <model> <input>
//
//   relay_root  e.g. http://127.0.0.1:9080 (the script adds /v1 for openai;
//               the Anthropic SDK adds /v1/messages itself)
//
// Both SDKs are given a fetch that tees the response body: one branch goes
// to the SDK, the other is kept as the raw stream. One JSON line on
// stdout: {"text":"...","events":N,"status":200,"streamId":"rs_...",
// "raw":"..."}, text being what the SDK collected (the answer's text
// deltas; reasoning and thinking aside), events the number of chunks or
// events the SDK yielded. An error the SDK raised adds
// "error":{"name","status","message"}; the script still exits 0 so the
// raw bytes reach the test. Bad usage exits 64.

import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const [root, apiKey, dialect, model, input] = process.argv.slice(2);
if (!input || !['chat', 'messages'].includes(dialect)) {
  process.stderr.write('usage: node resume-sdks.mjs <relay_root> <api_key> chat|messages <model> <input>\n');
  process.exit(64);
}

const out = { text: '', events: 0, status: 0, streamId: null, raw: '' };
const rawDone = [];

// teeFetch sends the SDK's request and keeps a copy of the response body.
async function teeFetch(url, init) {
  const res = await fetch(url, init);
  out.status = res.status;
  out.streamId = res.headers.get('x-relay-stream-id');
  if (!res.body) return res;
  const [sdk, mine] = res.body.tee();
  rawDone.push((async () => {
    const dec = new TextDecoder();
    const reader = mine.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      out.raw += dec.decode(value, { stream: true });
    }
    out.raw += dec.decode();
  })());
  return new Response(sdk, { status: res.status, statusText: res.statusText, headers: res.headers });
}

try {
  if (dialect === 'chat') {
    const client = new OpenAI({ baseURL: root + '/v1', apiKey, fetch: teeFetch, maxRetries: 0, timeout: 30_000 });
    const stream = await client.chat.completions.create({
      model,
      stream: true,
      messages: [{ role: 'user', content: input }],
    });
    for await (const chunk of stream) {
      out.events++;
      out.text += chunk.choices?.[0]?.delta?.content ?? '';
    }
  } else {
    const client = new Anthropic({ baseURL: root, apiKey, authToken: null, fetch: teeFetch, maxRetries: 0, timeout: 30_000 });
    const stream = client.messages.stream({
      model,
      max_tokens: 1024,
      messages: [{ role: 'user', content: input }],
    });
    stream.on('streamEvent', () => { out.events++; });
    stream.on('text', (t) => { out.text += t; });
    const final = await stream.finalMessage();
    const whole = final.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
    if (whole !== out.text) {
      throw new Error(`finalMessage() has the text ${JSON.stringify(whole)}, the text events ${JSON.stringify(out.text)}`);
    }
  }
} catch (e) {
  out.error = { name: e?.constructor?.name ?? typeof e, status: e?.status ?? null, message: String(e?.message ?? e) };
}
await Promise.all(rawDone);
process.stdout.write(JSON.stringify(out) + '\n');
process.exit(0);
