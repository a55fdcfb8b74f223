package sim_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/llmrelay/caddy-llm-relay/internal/sim"
)

// A stream in the tags form, as Qwen3 behind vLLM without a reasoning
// parser sends it: the reasoning is content between <think> tags, and
// the tags come cut where the seed's draws put the cuts (here `<th` and
// `ink>`, and `</` and `think>`). The first delta is the role chunk's
// empty content; the X-Sim-Reasoning-Form header would pick another form
// for this one request.
func Example_reasoningTags() {
	s, err := sim.New(sim.Config{
		Seed:             2,
		ReasoningTokens:  new(3),
		ContentTokens:    new(2),
		ReasoningForm:    sim.ReasoningTags,
		ReasoningPattern: sim.Pattern{Kind: sim.Steady}, // rate 0: no waits
		ContentPattern:   sim.Pattern{Kind: sim.Steady},
	})
	if err != nil {
		panic(err)
	}
	ts := httptest.NewServer(s)
	defer ts.Close()
	resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"qwen3","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content *string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			panic(err)
		}
		if len(c.Choices) == 1 && c.Choices[0].Delta.Content != nil {
			fmt.Printf("%q\n", *c.Choices[0].Delta.Content)
		}
	}
	// Output:
	// ""
	// "<th"
	// "ink>\n"
	// " answer"
	// " the"
	// " token"
	// "\n"
	// "</"
	// "think>"
	// "\n\n"
	// " first"
	// "\t"
}
