// The official @google/genai SDK against a Gemini endpoint (the simulator,
// or the relay), reported as ONE JSON line on stdout.
// simulator/gemini_test.go runs it; by hand:
//
//   node e2e/node/gemini.mjs <base_url> <api_key> <model> create|stream|tools|error
//
//   base_url  the root the SDK appends /v1beta/models/... to, e.g. http://127.0.0.1:9150
//   create    models.generateContent with includeThoughts
//   stream    models.generateContentStream with includeThoughts
//   tools     a forced function call (mode ANY), streamed, then the round
//             trip: the model turn as received (thoughtSignature included)
//             and a functionResponse with the call's id, answered whole
//   error     generateContent, then generateContentStream; each one's error
//
// create and stream print {"text","thoughts","signatures","finish","usage",
// "chunks"}: text and thoughts joined from the parts (thought: true or
// not), signatures every thoughtSignature in order, finish the last
// finishReason, usage the last usageMetadata. tools prints {"calls":[{"id",
// "name","args"}],"signatures","finish","answer"}. error prints
// {"create":{"name","status","message"},"stream":{...,"chunks"}}. An
// unexpected error prints {"error":{"name","message"}} and exits 2; bad
// usage exits 64.

import { GoogleGenAI, FunctionCallingConfigMode } from '@google/genai';

const [baseUrl, apiKey, model, mode] = process.argv.slice(2);
if (!baseUrl || !apiKey || !model || !['create', 'stream', 'tools', 'error'].includes(mode)) {
  process.stderr.write('usage: node gemini.mjs <base_url> <api_key> <model> create|stream|tools|error\n');
  process.exit(64);
}

// No retries (the SDK makes none without retryOptions) and nothing from
// the environment: the key and base URL are given.
const ai = new GoogleGenAI({ apiKey, httpOptions: { baseUrl, timeout: 30_000 } });
const contents = 'Say hi';
const thinking = { thinkingConfig: { includeThoughts: true } };

function print(v) {
  process.stdout.write(JSON.stringify(v) + '\n');
}

// collect folds responses (one, or a stream's chunks) into one summary.
function collect(acc, resp) {
  acc.chunks++;
  const cand = resp.candidates?.[0];
  for (const part of cand?.content?.parts ?? []) {
    if (part.thoughtSignature) acc.signatures.push(part.thoughtSignature);
    if (part.functionCall) acc.calls.push(part.functionCall);
    else if (part.thought) acc.thoughts += part.text ?? '';
    else acc.text += part.text ?? '';
    acc.parts.push(part);
  }
  if (cand?.finishReason) acc.finish = cand.finishReason;
  if (resp.usageMetadata) acc.usage = resp.usageMetadata;
  return acc;
}

const empty = () => ({ text: '', thoughts: '', signatures: [], calls: [], parts: [], finish: '', usage: null, chunks: 0 });

function summary(acc) {
  const { text, thoughts, signatures, finish, usage, chunks } = acc;
  return { text, thoughts, signatures, finish, usage, chunks };
}

function errorOf(e) {
  return { name: e?.name, status: e?.status, message: String(e?.message ?? e) };
}

try {
  if (mode === 'create') {
    const resp = await ai.models.generateContent({ model, contents, config: thinking });
    print(summary(collect(empty(), resp)));
  } else if (mode === 'stream') {
    const acc = empty();
    for await (const chunk of await ai.models.generateContentStream({ model, contents, config: thinking })) {
      collect(acc, chunk);
    }
    print(summary(acc));
  } else if (mode === 'tools') {
    const config = {
      ...thinking,
      tools: [{ functionDeclarations: [{
        name: 'get_weather',
        description: 'The weather in a city',
        parameters: { type: 'object', properties: { input: { type: 'string' } } },
      }] }],
      toolConfig: { functionCallingConfig: { mode: FunctionCallingConfigMode.ANY } },
    };
    const first = [{ role: 'user', parts: [{ text: 'Weather in Paris?' }] }];
    const acc = empty();
    for await (const chunk of await ai.models.generateContentStream({ model, contents: first, config })) {
      collect(acc, chunk);
    }
    // The model turn goes back as it came, thought parts and signatures
    // included, as Gemini 3 requires inside a tool loop.
    const modelTurn = { role: 'model', parts: acc.parts.filter((p) => p.thought || p.functionCall || p.text) };
    const responses = acc.calls.map((c) => ({
      functionResponse: { id: c.id, name: c.name, response: { result: 'sunny' } },
    }));
    const second = await ai.models.generateContent({
      model, config, contents: [...first, modelTurn, { role: 'user', parts: responses }],
    });
    print({
      calls: acc.calls.map(({ id, name, args }) => ({ id, name, args })),
      signatures: acc.signatures,
      finish: acc.finish,
      answer: second.text,
    });
  } else {
    const out = {};
    try {
      await ai.models.generateContent({ model, contents });
      out.create = null;
    } catch (e) {
      out.create = errorOf(e);
    }
    const acc = empty();
    try {
      for await (const chunk of await ai.models.generateContentStream({ model, contents })) {
        collect(acc, chunk);
      }
      out.stream = null;
    } catch (e) {
      out.stream = { ...errorOf(e), chunks: acc.chunks };
    }
    print(out);
  }
} catch (e) {
  print({ error: { name: e?.name, message: String(e?.message ?? e) } });
  process.exit(2);
}
