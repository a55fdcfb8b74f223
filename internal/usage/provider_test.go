package usage

import "testing"

// The provider usage members, as real streams carry them (the chunks are
// from vercel/ai's recorded provider streams, Apache-2.0: see
// testdata/recordings/usage/README.md at the repository's root).
func TestProviderUsage(t *testing.T) {
	for _, c := range []struct {
		name, chunk string
		want        Usage
		ok          bool
	}{
		{"groq x_groq", `{"id":"chatcmpl-e7f8e220-656c-4455-a132-dacfc1370798","object":"chat.completion.chunk","created":1729171479,"model":"gemma2-9b-it","system_fingerprint":"fp_10c08bf97d","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"x_groq":{"id":"req_01jadadp0femyae9kav1gpkhe8","usage":{"queue_time":0.061348671,"prompt_tokens":18,"prompt_time":0.000211569,"completion_tokens":439,"completion_time":0.798181818,"total_tokens":457,"total_time":0.798393387}}}`,
			Usage{Prompt: 18, Completion: 439}, true},
		{"kimi in the choice", `{"id":"chatcmpl-6a8de8b0aa0c275363b2fc8a","object":"chat.completion.chunk","created":1787685040,"model":"kimi-k2.5","choices":[{"index":0,"delta":{},"finish_reason":"stop","usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17,"completion_tokens_details":{"reasoning_tokens":1}}}],"system_fingerprint":"fpv0_1c3effa9"}`,
			Usage{Prompt: 12, Completion: 5, Reasoning: 1}, true},
		{"kimi top-level cached_tokens", `{"choices":[{"index":0,"delta":{},"finish_reason":"stop","usage":{"prompt_tokens":90,"completion_tokens":50,"total_tokens":140,"cached_tokens":90,"completion_tokens_details":{"reasoning_tokens":33}}}]}`,
			Usage{Prompt: 90, Completion: 50, Reasoning: 33, Cached: 90}, true},
		{"x_groq without usage", `{"choices":[{"index":0,"delta":{"content":""}}],"x_groq":{"id":"req_1","seed":1535227698}}`, Usage{}, false},
		{"null usage in the choice", `{"choices":[{"index":0,"delta":{},"usage":null}]}`, Usage{}, false},
		{"a second choice only", `{"choices":[{"index":0,"delta":{}},{"index":1,"delta":{},"usage":{"prompt_tokens":1,"completion_tokens":1}}]}`, Usage{}, false},
		{"not JSON", `{"x_groq":{"usage":{"prompt_tokens":1`, Usage{}, false},
		{"nothing", `{"choices":[]}`, Usage{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw, ok := ProviderUsage([]byte(c.chunk))
			if ok != c.ok {
				t.Fatalf("ok %v, want %v (%s)", ok, c.ok, raw)
			}
			if !ok {
				return
			}
			got, parsed := ParseUsage(raw)
			if !parsed || got != c.want {
				t.Fatalf("ParseUsage(%s) = %+v %v, want %+v", raw, got, parsed, c.want)
			}
		})
	}
}

// Moonshot reports cached tokens at the top of its usage object; the
// standard place wins when both are there.
func TestParseUsageTopLevelCachedTokens(t *testing.T) {
	u, ok := ParseUsage([]byte(`{"prompt_tokens":90,"completion_tokens":50,"cached_tokens":80}`))
	if !ok || u.Cached != 80 {
		t.Fatalf("%+v %v", u, ok)
	}
	u, _ = ParseUsage([]byte(`{"prompt_tokens":90,"completion_tokens":50,"cached_tokens":80,"prompt_tokens_details":{"cached_tokens":70}}`))
	if u.Cached != 80 {
		t.Fatalf("the larger of the two: %+v", u)
	}
}

func TestToolArgumentRunes(t *testing.T) {
	for _, c := range []struct {
		chunk string
		want  int
	}{
		{`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"value\":\"Sparkle Day\"}"}}]}}]}`, len(`{"value":"Sparkle Day"}`)},
		{`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments": "h\u00e9"}},{"index":1,"function":{"arguments":"日本"}}]}}]}`, 4},
		{`{"choices":[{"message":{"function_call":{"name":"f","arguments":"{}"}}}]}`, 2},
		{`{"choices":[{"delta":{"content":"say \"arguments\": \"xx\""}}]}`, 0},
		{`{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":null}}]}}]}`, 0},
		{`{"x":"arguments","arguments":"ab`, 2}, // cut off: counted as far as it goes
	} {
		if got := ToolArgumentRunes([]byte(c.chunk)); got != c.want {
			t.Errorf("ToolArgumentRunes(%s) = %d, want %d", c.chunk, got, c.want)
		}
	}
}
