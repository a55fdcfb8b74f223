// refcounts.cjs computes the reference token counts in reference.json from
// the samples in corpus/ and the request bodies in chat/. It is not run by
// the tests: run it by hand after changing a sample, with the npm package
// gpt-tokenizer (pure JS, o200k_base and cl100k_base) installed outside the
// repo, e.g.
//
//	mkdir -p /tmp/tok && cd /tmp/tok && npm install gpt-tokenizer@4.0.0
//	NODE_PATH=/tmp/tok/node_modules node refcounts.cjs > reference.json
//
// (run from this folder). Corpus counts are plain encode() lengths with no
// special tokens. Chat counts follow the OpenAI cookbook rule that
// gpt-tokenizer's computeChatCompletionTokenCount implements: 3 tokens per
// message + role + content (+ name), 3 for the reply priming, and tools as
// the TypeScript-like "namespace functions" text the API renders them into.
// Array content is counted as the concatenation of its "text" parts.
const fs = require('fs');
const path = require('path');
const o200k = require('gpt-tokenizer/cjs/encoding/o200k_base');
const cl100k = require('gpt-tokenizer/cjs/encoding/cl100k_base');
const fc = require('gpt-tokenizer/cjs/functionCalling');

const count = (enc) => (s) => enc.encode(s).length;

function chatCount(body, enc) {
  const messages = body.messages.map((m) => {
    let content = m.content;
    if (Array.isArray(content)) {
      content = content.filter((p) => p.type === 'text').map((p) => p.text).join('');
    }
    return { role: m.role, content, name: m.name };
  });
  let functions = body.functions;
  if (body.tools) functions = body.tools.filter((t) => t.type === 'function').map((t) => t.function);
  return fc.computeChatCompletionTokenCount({ messages, functions }, count(enc));
}

const out = { tokenizer: 'gpt-tokenizer@4.0.0', corpus: {}, chat: {} };
for (const f of fs.readdirSync('corpus').sort()) {
  const text = fs.readFileSync(path.join('corpus', f), 'utf8');
  out.corpus[f] = {
    bytes: Buffer.byteLength(text),
    o200k: o200k.encode(text).length,
    cl100k: cl100k.encode(text).length,
  };
}
for (const f of fs.readdirSync('chat').sort()) {
  const body = JSON.parse(fs.readFileSync(path.join('chat', f), 'utf8'));
  out.chat[f] = { o200k: chatCount(body, o200k), cl100k: chatCount(body, cl100k) };
}
process.stdout.write(JSON.stringify(out, null, 1) + '\n');
