// One chat completion through the relay with the official openai Node SDK,
// reported as ONE JSON line on stdout. pacing_e2e_test.go runs it; it can
// also be run by hand against a running relay:
//
//   node e2e/node/stream.mjs <base_url> <api_key> <model> [<mode> [<call>]]
//
// Each argument falls back to an environment variable:
//
//   base_url  RELAY_BASE_URL  e.g. http://127.0.0.1:9080/v1
//   api_key   RELAY_API_KEY
//   model     RELAY_MODEL
//   mode      RELAY_MODE      sent as the X-Relay-Mode header (off, pace,
//                             split-reasoning, ...); empty sends no header;
//                             "body:<mode>" sends "relay":{"mode":"<mode>"}
//                             in the request body instead
//   call      RELAY_CALL      stream (default) or create (non-streaming)
//
// Success prints
//   {"reasoning":"...","content":"...","chunks":N,"reasoning_chunks":R,
//    "content_chunks":C,"finish_reason":"stop","usage":{...}}
// where chunks counts every chunk the SDK yielded (0 for create) and
// reasoning_chunks/content_chunks count those carrying non-empty text.
//
// An error (an HTTP error status, or an in-band error event in the stream)
// prints {"error":{"status":...,"code":...,"type":...,"message":...}} plus
// whatever text arrived before it, and exits with status 2. Bad usage
// exits with status 64.

import OpenAI from 'openai';

const [argBase, argKey, argModel, argMode, argCall] = process.argv.slice(2);
const baseURL = argBase ?? process.env.RELAY_BASE_URL;
const apiKey = argKey ?? process.env.RELAY_API_KEY;
const model = argModel ?? process.env.RELAY_MODEL;
const mode = argMode ?? process.env.RELAY_MODE ?? '';
const call = argCall ?? process.env.RELAY_CALL ?? 'stream';

if (!baseURL || !apiKey || !model || !['stream', 'create'].includes(call)) {
  process.stderr.write(
    'usage: node stream.mjs <base_url> <api_key> <model> [<mode> [stream|create]]\n',
  );
  process.exit(64);
}

const defaultHeaders = {};
const extraBody = {};
if (mode.startsWith('body:')) {
  extraBody.relay = { mode: mode.slice('body:'.length) };
} else if (mode !== '') {
  defaultHeaders['X-Relay-Mode'] = mode;
}

const client = new OpenAI({ baseURL, apiKey, defaultHeaders, maxRetries: 0, timeout: 30_000 });

const messages = [{ role: 'user', content: 'Say something mixed: ASCII, 中文, emoji.' }];

const out = {
  reasoning: '',
  content: '',
  chunks: 0,
  reasoning_chunks: 0,
  content_chunks: 0,
  finish_reason: null,
  usage: null,
};

function print(v) {
  process.stdout.write(JSON.stringify(v) + '\n');
}

try {
  if (call === 'stream') {
    const stream = await client.chat.completions.create({
      model,
      stream: true,
      stream_options: { include_usage: true },
      messages,
      ...extraBody,
    });
    for await (const chunk of stream) {
      out.chunks++;
      if (chunk.usage) out.usage = chunk.usage;
      const choice = chunk.choices?.[0];
      if (!choice) continue;
      const delta = choice.delta ?? {};
      if (typeof delta.reasoning_content === 'string' && delta.reasoning_content !== '') {
        out.reasoning += delta.reasoning_content;
        out.reasoning_chunks++;
      }
      if (typeof delta.content === 'string' && delta.content !== '') {
        out.content += delta.content;
        out.content_chunks++;
      }
      if (choice.finish_reason) out.finish_reason = choice.finish_reason;
    }
  } else {
    const res = await client.chat.completions.create({ model, messages, ...extraBody });
    const choice = res.choices?.[0];
    out.reasoning = choice?.message?.reasoning_content ?? '';
    out.content = choice?.message?.content ?? '';
    out.finish_reason = choice?.finish_reason ?? null;
    out.usage = res.usage ?? null;
  }
} catch (err) {
  const e = {
    status: err?.status ?? null,
    code: err?.code ?? null,
    type: err?.type ?? null,
    message: String(err?.message ?? err),
  };
  if (!(err instanceof OpenAI.APIError)) e.name = err?.name ?? null;
  print({ error: e, ...out });
  process.exit(2);
}

print(out);
