#!/usr/bin/env python3
"""Stream one answer from the relay and decode it as the Python SDKs do.

Written as a published client sample is: Python's standard library only
(urllib). The decoder follows the one in the official openai and anthropic
Python SDKs (theirs comes from httpx-sse), including its one quirk: the last
event id is kept across events, as the SSE specification says, and a blank
line dispatches an event whenever an id has been seen, even when the block
had nothing but comments. Every dispatched event's data is parsed as JSON,
as the openai SDK's Chat stream does ("[DONE]" ends it; Messages "ping"
events are skipped), so such an empty event fails here as it fails there.

    python3 resume_sse.py <relay_root> <api_key> chat|messages <model> <input>

It prints one JSON object: {"text": the answer's text deltas, "events": the
events decoded, "status": the HTTP status, "streamId": the
X-Relay-Stream-Id header, "raw": the bytes read}, and "error" when reading,
decoding or parsing failed. It exits 0 either way (the raw bytes are the
report), 64 on bad usage.
"""

import json
import sys
import urllib.error
import urllib.request


class Decoder:
    """Server-sent events, line by line, with the SDKs' dispatch rule."""

    def __init__(self):
        self.event = None
        self.data = []
        self.last_id = None
        self.retry = None

    def line(self, text):
        """Takes one line without its end; returns a dispatched event or None."""
        if text == "":
            if not self.event and not self.data and not self.last_id and self.retry is None:
                return None
            ev = {"event": self.event, "data": "\n".join(self.data), "id": self.last_id, "retry": self.retry}
            self.event, self.data, self.retry = None, [], None  # the id stays
            return ev
        if text.startswith(":"):
            return None
        name, _, value = text.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "event":
            self.event = value
        elif name == "data":
            self.data.append(value)
        elif name == "id" and "\0" not in value:
            self.last_id = value
        elif name == "retry":
            try:
                self.retry = int(value)
            except ValueError:
                pass
        return None


def main(argv):
    if len(argv) != 6 or argv[3] not in ("chat", "messages"):
        sys.stderr.write("usage: resume_sse.py <relay_root> <api_key> chat|messages <model> <input>\n")
        return 64
    root, key, dialect, model, text = argv[1:]
    messages = [{"role": "user", "content": text}]
    if dialect == "chat":
        url = root + "/v1/chat/completions"
        body = {"model": model, "stream": True, "messages": messages}
        headers = {"Authorization": "Bearer " + key}
    else:
        url = root + "/v1/messages"
        body = {"model": model, "stream": True, "max_tokens": 1024, "messages": messages}
        headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
    headers["Content-Type"] = "application/json"
    headers["Accept"] = "text/event-stream"
    out = {"text": "", "events": 0, "status": 0, "streamId": None, "raw": ""}
    raw = bytearray()
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            out["status"] = resp.status
            out["streamId"] = resp.headers.get("X-Relay-Stream-Id")
            dec = Decoder()
            done = False
            while not done:
                line = resp.readline()
                if not line:
                    break
                raw += line
                ev = dec.line(line.decode("utf-8").rstrip("\r\n"))
                if ev is None:
                    continue
                out["events"] += 1
                if ev["data"].startswith("[DONE]"):
                    done = True
                    continue
                if ev["event"] == "ping":
                    continue
                data = json.loads(ev["data"])
                if ev["event"] == "error" or isinstance(data, dict) and data.get("type") == "error":
                    raise RuntimeError("error event: " + ev["data"])
                if dialect == "chat":
                    for choice in data.get("choices") or []:
                        out["text"] += (choice.get("delta") or {}).get("content") or ""
                elif data.get("type") == "content_block_delta" and data["delta"].get("type") == "text_delta":
                    out["text"] += data["delta"]["text"]
                elif data.get("type") == "message_stop":
                    done = True
            # The rest of the body (a comment after the last event).
            raw += resp.read()
    except urllib.error.HTTPError as e:
        out["status"] = e.code
        out["error"] = "HTTP %d: %s" % (e.code, e.read().decode("utf-8", "replace"))
    except Exception as e:  # the decoder's or the JSON parser's failure is the finding
        out["error"] = "%s: %s" % (type(e).__name__, e)
    out["raw"] = raw.decode("utf-8", "replace")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
