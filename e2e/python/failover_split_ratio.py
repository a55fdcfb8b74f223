"""A client written as the published sample is: a failover loop over
several models, each request sent with
"relay": {"mode": "split-reasoning", "split_ratio": 0.35}, the answer
streamed. Python's standard library only (urllib), as the sample.

    python3 failover_split_ratio.py <base_url> <api_key> <model>...

base_url is the relay's, such as http://127.0.0.1:9080/v1. The models are
tried in order until one streams an answer to its end. Prints ONE JSON
line: {"model": ..., "reasoning": ..., "content": ..., "finish_reason":
..., "failures": [{"model", "status", "code"}...]}, and exits 0; when
every model failed, the same line with "model": null, and exits 2.
knobs_e2e_test.go runs it.
"""

import json
import sys
import urllib.error
import urllib.request


def stream_chat(base_url, api_key, model):
    body = {
        "model": model,
        "stream": True,
        "messages": [{"role": "user", "content": "Think it through, then answer."}],
        "relay": {"mode": "split-reasoning", "split_ratio": 0.35},
    }
    req = urllib.request.Request(
        base_url.rstrip("/") + "/chat/completions",
        data=json.dumps(body).encode("utf-8"),
        headers={
            "Authorization": "Bearer " + api_key,
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
        },
        method="POST",
    )
    out = {"reasoning": "", "content": "", "finish_reason": None}
    with urllib.request.urlopen(req, timeout=60) as resp:
        for raw in resp:
            line = raw.decode("utf-8").rstrip("\r\n")
            if not line.startswith("data:"):
                continue  # event names, comments (": keep-alive"), blank lines
            data = line[len("data:"):].strip()
            if data == "[DONE]":
                return out
            chunk = json.loads(data)
            if "error" in chunk:
                raise RuntimeError("in-band error: " + json.dumps(chunk["error"]))
            for choice in chunk.get("choices", []):
                delta = choice.get("delta") or {}
                out["reasoning"] += delta.get("reasoning_content") or ""
                out["content"] += delta.get("content") or ""
                if choice.get("finish_reason"):
                    out["finish_reason"] = choice["finish_reason"]
    raise RuntimeError("the stream ended without [DONE]")


def main():
    if len(sys.argv) < 4:
        sys.stderr.write("usage: failover_split_ratio.py <base_url> <api_key> <model>...\n")
        return 64
    base_url, api_key, models = sys.argv[1], sys.argv[2], sys.argv[3:]
    failures = []
    for model in models:
        try:
            answer = stream_chat(base_url, api_key, model)
        except urllib.error.HTTPError as e:
            try:
                code = json.loads(e.read().decode("utf-8"))["error"].get("code")
            except Exception:  # not an OpenAI error body
                code = None
            failures.append({"model": model, "status": e.code, "code": code})
            continue
        except (urllib.error.URLError, RuntimeError, ValueError) as e:
            failures.append({"model": model, "status": None, "code": str(e)})
            continue
        print(json.dumps(dict(answer, model=model, failures=failures)))
        return 0
    print(json.dumps({"model": None, "failures": failures}))
    return 2


if __name__ == "__main__":
    sys.exit(main())
