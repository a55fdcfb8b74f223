#!/usr/bin/env python3
"""Pick the fastest healthy region by timing the relay's ping, then chat there.

Written as the published client sample is: Python's standard library only
(urllib), one ping per region a few times over, the lowest time wins, and
the chat request carries the winner as X-Region-Hint.

    RELAY_BASE=http://127.0.0.1:9080 RELAY_KEY=sk-... python3 region_picker.py

It prints one JSON object (what it measured and what served the chat) and
exits 0 when the chat was answered, 1 otherwise.
"""

import json
import os
import sys
import time
import urllib.error
import urllib.request

BASE = os.environ.get("RELAY_BASE", "http://127.0.0.1:9080")
KEY = os.environ.get("RELAY_KEY", "")
MODEL = os.environ.get("RELAY_MODEL", "chat")
REGIONS = ["nrt", "kix", "icn", "sin", "fra"]
TRIES = 3


def ping(region):
    """Times GET /v1/ping for one region: (seconds, answer) or (None, error)."""
    req = urllib.request.Request(
        BASE + "/v1/ping",
        headers={"Authorization": "Bearer " + KEY, "X-Region-Hint": region},
    )
    start = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=15) as resp:
            body = json.load(resp)
        return time.monotonic() - start, body
    except urllib.error.HTTPError as e:
        return None, {"status": e.code, "error": json.load(e).get("error", {})}
    except (urllib.error.URLError, OSError) as e:
        return None, {"status": 0, "error": {"message": str(e)}}


def pick_region():
    pings = {}
    best, best_time = None, None
    for region in REGIONS:
        times, last = [], None
        for _ in range(TRIES):
            elapsed, answer = ping(region)
            last = answer
            if elapsed is None:
                break  # unhealthy or unknown: no use asking again
            times.append(elapsed)
        pings[region] = {"ms": [round(t * 1000, 1) for t in times], "answer": last}
        if times and (best_time is None or min(times) < best_time):
            best, best_time = region, min(times)
    return best, pings


def chat(region):
    body = json.dumps({
        "model": MODEL,
        "messages": [{"role": "user", "content": "Say hello."}],
    }).encode()
    req = urllib.request.Request(
        BASE + "/v1/chat/completions",
        data=body,
        headers={
            "Authorization": "Bearer " + KEY,
            "Content-Type": "application/json",
            "X-Region-Hint": region,
        },
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        answer = json.load(resp)
        return {
            "status": resp.status,
            "upstream": resp.headers.get("X-Relay-Upstream"),
            "region": resp.headers.get("X-Relay-Region"),
            "content": answer["choices"][0]["message"]["content"],
        }


def main():
    region, pings = pick_region()
    out = {"picked": region, "pings": pings}
    if region is None:
        print(json.dumps(out))
        return 1
    try:
        out["chat"] = chat(region)
    except urllib.error.HTTPError as e:
        out["chat"] = {"status": e.code, "error": e.read().decode(errors="replace")}
        print(json.dumps(out))
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
