package llmrelay_test

// A hand-off stream is a stream: the reasoning leg's reasoning reaches
// the client as it comes, and the answer leg's answer too, in every
// smoothing mode. The legs here are paced simulators (a token every
// 100 ms), so a relay that holds the stream back until its end (or until
// Caddy's buffer fills) shows as reasoning that arrives with the answer.

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
	"time"
)

// handoffPacedSimSite runs paced legs on :9089: /reason/ six reasoning
// tokens, one every 100 ms, then an answer the relay stops; /answer/ six
// answer tokens, one every 100 ms.
const handoffPacedSimSite = `http://127.0.0.1:9089 {
	handle /reason/* {
		llm_simulator {
			seed 28
			reasoning_tokens 6
			content_tokens 4
			reasoning_pattern steady 10
			content_pattern steady 0
		}
	}
	handle /answer/* {
		llm_simulator {
			seed 29
			reasoning_tokens 0
			content_tokens 6
			pattern steady 10
		}
	}
}`

const handoffPacedRelay = `llm_relay {
	upstream reasoner http://127.0.0.1:9089/reason/v1 {
		api chat
	}
	upstream answerer http://127.0.0.1:9089/answer/v1 {
		api chat
	}
	model baton-paced {
		reason reasoner sim-r1
		to answerer sim-chat
	}
}`

// TestHandoffStreamsAsItComes: in each mode, the first reasoning chunk
// reaches the client while the reasoning leg is still reasoning (long
// before the stream's end), and the first answer chunk while the answer
// leg is still answering.
func TestHandoffStreamsAsItComes(t *testing.T) {
	startRelay(t, handoffPacedRelay, handoffPacedSimSite)
	for _, mode := range []string{"off", "pace", "split-reasoning"} {
		req, err := http.NewRequest(http.MethodPost, relayBase+"/v1/chat/completions", strings.NewReader(
			`{"model":"baton-paced","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Relay-Mode", mode)
		start := time.Now()
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		var firstReasoning, firstAnswer, end time.Duration
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			at := time.Since(start)
			switch {
			case firstReasoning == 0 && strings.Contains(line, `"reasoning_content":"`):
				firstReasoning = at
			case firstAnswer == 0 && strings.Contains(line, `"content":"`) && !strings.Contains(line, `"content":""`):
				firstAnswer = at
			}
			end = at
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || firstReasoning == 0 || firstAnswer == 0 {
			t.Fatalf("%s: status %d, first reasoning at %v, first answer at %v: want a stream of both", mode, resp.StatusCode, firstReasoning, firstAnswer)
		}
		// Each leg takes about 600 ms; 300 ms of margin for the pacer.
		if end-firstReasoning < 700*time.Millisecond || end-firstAnswer < 300*time.Millisecond {
			t.Errorf("%s: first reasoning at %v, first answer at %v, end at %v: the relay held the stream back instead of streaming each leg as it came",
				mode, firstReasoning.Round(time.Millisecond), firstAnswer.Round(time.Millisecond), end.Round(time.Millisecond))
		}
	}
}
