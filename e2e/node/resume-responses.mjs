// Resumable Responses streams (issue 31) as the official openai npm client
// sees them. resume_clients_e2e_test.go runs it; by hand:
//
//   node e2e/node/resume-responses.mjs <base_url> <api_key> <model> <input> <mode> [<k>]
//
//   resume <k,...>  an uninterrupted stream first, then for each k a stream
//               read for k events (k < 0: all but -k) and aborted (its
//               connection goes away), the rest read with
//               responses.retrieve(id, {stream: true, starting_after: <the
//               k-th event's sequence_number>}), then the SDK's own
//               resuming helper responses.stream({response_id,
//               starting_after}) on the same id: {"events":[...],
//               "cuts":[{"id","before":[...],"after":[...],
//               "helper":{"text","status","events"}}...]}
//   background  responses.create({background: true}), polled with
//               retrieve(id) until it is no longer queued or in progress,
//               then streamed from the start with retrieve(id, {stream:
//               true}): {"id","first":{"status","background"},"polls",
//               "final":{"status","text"},"events":[...]}
//   cancel [<ms>] responses.create({background: true}), then after ms
//               responses.cancel(id), then retrieve(id):
//               {"id","first":{"status"},"cancelled":{"status"},
//               "retrieved":{"status","text"}}
//
// One JSON line on stdout; when the SDK raised: {"error":{"name","status","message"}}.

import OpenAI from 'openai';

const [baseURL, apiKey, model, input, mode, k] = process.argv.slice(2);
if (!mode) {
  process.stderr.write('usage: node resume-responses.mjs <base_url> <api_key> <model> <input> resume <k,...>|background|cancel\n');
  process.exit(64);
}

const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 15_000 });
const params = { model, input };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function collect(stream, into, stopAt = Infinity) {
  for await (const ev of stream) {
    into.push(ev);
    if (into.length >= stopAt) break; // leaving the loop aborts the request
  }
  return into;
}

const out = {};
try {
  switch (mode) {
    case 'resume': {
      // Each request's input ends with a letter of its own (the same
      // length, so the same usage): none re-attaches to another.
      out.events = await collect(await client.responses.create({ ...params, input: input + ' a', stream: true }), []);
      out.cuts = [];
      for (const [i, n] of k.split(',').map(Number).entries()) {
        const body = { ...params, input: input + ' ' + 'bcdefghij'[i], stream: true };
        const before = await collect(await client.responses.create(body), [], n > 0 ? n : out.events.length + n);
        const id = before[0]?.response?.id;
        const last = before[before.length - 1].sequence_number;
        const cut = { id, before };
        out.cuts.push(cut);
        cut.after = await collect(await client.responses.retrieve(id, { stream: true, starting_after: last }), []);
        const s = client.responses.stream({ response_id: id, starting_after: last });
        let events = 0;
        s.on('event', () => { events++; });
        const r = await s.finalResponse();
        cut.helper = { text: r.output_text, status: r.status, events };
      }
      break;
    }
    case 'background': {
      const first = await client.responses.create({ ...params, background: true });
      out.id = first.id;
      out.first = { status: first.status, background: first.background };
      let r = first, polls = 0;
      for (const until = Date.now() + 15_000; (r.status === 'queued' || r.status === 'in_progress') && Date.now() < until; polls++) {
        await sleep(100);
        r = await client.responses.retrieve(first.id);
      }
      out.polls = polls;
      out.final = { status: r.status, text: r.output_text };
      out.events = await collect(await client.responses.retrieve(first.id, { stream: true }), []);
      break;
    }
    case 'cancel': {
      const first = await client.responses.create({ ...params, background: true });
      out.id = first.id;
      out.first = { status: first.status };
      await sleep(Number(k ?? 0)); // the generation is under way upstream
      const c = await client.responses.cancel(first.id);
      out.cancelled = { status: c.status };
      const r = await client.responses.retrieve(first.id);
      out.retrieved = { status: r.status, text: r.output_text };
      break;
    }
    default:
      throw new Error('unknown mode ' + mode);
  }
} catch (e) {
  out.error = { name: e.constructor?.name ?? '', status: e.status ?? 0, message: String(e.message ?? e) };
}
process.stdout.write(JSON.stringify(out) + '\n');
