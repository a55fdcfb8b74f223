// An EventSource client (the eventsource npm package) following a Chat or
// Messages stream of the relay and reconnecting with Last-Event-ID when
// its connection breaks. resume_clients_e2e_test.go runs it; by hand:
//
//   node e2e/node/resume-eventsource.mjs <base_url> <api_key> chat|messages <model> <input>
//
// EventSource only sends GETs, and a conversation starts with a POST. The
// package takes a fetch implementation (its `fetch` option), which is how
// a client uses the relay's stream URL: the first connection is the POST
// of the request (the fetch override turns EventSource's GET into it) and
// its response announces `X-Relay-Stream`; every reconnection is
// EventSource's own GET, with its own Last-Event-ID header, sent to that
// URL instead. The relay's `retry:` hint sets the reconnection delay.
//
// One JSON line on stdout: {"events":[{"type","id","data"}...],
// "conns":[{"method","url","status","lastEventId","eventsBefore"}...],
// "errors":n,"streamURL"}; when the stream did not end: "error": "...".

import { EventSource } from 'eventsource';

const [baseURL, apiKey, dialect, model, input] = process.argv.slice(2);
if (!input) {
  process.stderr.write('usage: node resume-eventsource.mjs <base_url> <api_key> chat|messages <model> <input>\n');
  process.exit(64);
}

const chat = dialect === 'chat';
const url = baseURL + (chat ? '/chat/completions' : '/messages');
const body = JSON.stringify(chat
  ? { model, stream: true, messages: [{ role: 'user', content: input }] }
  : { model, stream: true, max_tokens: 1024, messages: [{ role: 'user', content: input }] });
const auth = chat
  ? { Authorization: 'Bearer ' + apiKey }
  : { 'x-api-key': apiKey, 'anthropic-version': '2023-06-01' };

const out = { events: [], conns: [], errors: 0, streamURL: null };
let streamURL = null;

const es = new EventSource(url, {
  fetch: async (target, init) => {
    const headers = { ...init.headers, ...auth };
    const conn = { lastEventId: headers['Last-Event-ID'] ?? null, eventsBefore: out.events.length };
    let res;
    if (streamURL === null) {
      conn.method = 'POST';
      conn.url = String(target);
      res = await fetch(target, { ...init, method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body });
      const s = res.headers.get('x-relay-stream');
      if (s) streamURL = out.streamURL = new URL(s, String(target)).href;
    } else {
      conn.method = 'GET';
      conn.url = streamURL;
      res = await fetch(streamURL, { ...init, headers });
    }
    conn.status = res.status;
    out.conns.push(conn);
    return res;
  },
});

const finished = new Promise((resolve) => {
  const record = (ev) => {
    out.events.push({ type: ev.type, id: ev.lastEventId, data: ev.data });
    if (chat ? ev.data === '[DONE]' : ev.type === 'message_stop' || ev.type === 'error') resolve();
  };
  es.addEventListener('message', record);
  for (const t of ['message_start', 'content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop', 'ping']) {
    es.addEventListener(t, record);
  }
  es.onerror = (e) => {
    if (e.data !== undefined) return record(e); // an in-band `event: error`
    out.errors++;
    if (es.readyState === EventSource.CLOSED) {
      out.error = `EventSource closed: ${e.message ?? ''} ${e.code ?? ''}`;
      resolve();
    }
  };
  setTimeout(() => { out.error = 'timed out'; resolve(); }, 20_000);
});
await finished;
es.close();
process.stdout.write(JSON.stringify(out) + '\n');
process.exit(0);
