package usage

import (
	"encoding/json"
	"reflect"
	"testing"
)

var usageSeeds = []string{
	`{"prompt_tokens":4,"completion_tokens":20,"total_tokens":24,"completion_tokens_details":{"reasoning_tokens":4}}`,
	`{"prompt_tokens":10,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":3,"audio_tokens":0},"prompt_cache_hit_tokens":7}`,
	`{"input_tokens":12,"output_tokens":30,"input_tokens_details":{"cached_tokens":2},"output_tokens_details":{"reasoning_tokens":9}}`,
	`{"input_tokens":12,"output_tokens":30,"cache_creation_input_tokens":100,"cache_read_input_tokens":null}`,
	`{"Prompt_Tokens":4,"completion_tokens":1}`,
	`{"prompt_tokens":4.0,"completion_tokens":1}`,
	`{"prompt_tokens":"4","completion_tokens":1}`,
	`{"prompt_tokens":1,"prompt_tokens":null,"completion_tokens":-3}`,
	`{"prompt_tokens":99999999999999999999}`,
	`{"prompt_tokens_details":null,"completion_tokens_details":{"reasoning_tokens":null},"completion_tokens":1}`,
	`{"prompt_tokens_details":{"cached_tokens":1},"prompt_tokens_details":{"other":2},"prompt_tokens":0}`,
	`{"\u0070rompt_tokens":5,"completion_tokens":01}`,
	`{"prompt_tokens":5} x`,
	` null `, `[]`, `{}`, `{"prompt_tokens":5,}`, `{"prompt_tokens":1e2}`,
	`{"prompt_toKens":1}`, `{"prompt_tokenſ":1}`,
	`{"prompt_tokens":90,"completion_tokens":50,"cached_tokens":90,"Cached_tokens":null}`,
}

// FuzzScanRawUsage: wherever the scanner decodes a usage object, it got
// what encoding/json gets, and it never accepts what encoding/json rejects.
func FuzzScanRawUsage(f *testing.F) {
	for _, s := range usageSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := scanRawUsage(raw)
		var want rawUsage
		err := json.Unmarshal(raw, &want)
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("scanner accepted %q, encoding/json: %v", raw, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: scanner %+v, encoding/json %+v", raw, dump(got), dump(want))
		}
	})
}

// FuzzMember: the usage member the scanner finds is encoding/json's.
func FuzzMember(f *testing.F) {
	for _, s := range usageSeeds {
		f.Add([]byte(`{"id":"x","usage":` + s + `}`))
	}
	f.Add([]byte(`{"usage":1,"usage":{"prompt_tokens":2}}`))
	f.Add([]byte(`{"Usage":1}`))
	f.Add([]byte(`{"choices":[{"message":{"usage":3}}]}`))
	f.Add([]byte(`{"usage":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		raw, ok := Member(b)
		var want struct {
			Usage json.RawMessage `json:"usage"`
		}
		err := json.Unmarshal(b, &want)
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("Member accepted %q, encoding/json: %v", b, err)
		}
		if string(raw) != string(want.Usage) {
			t.Fatalf("%q: Member %q, encoding/json %q", b, raw, want.Usage)
		}
	})
}

// TestScanRawUsageTakesProviderShapes: the usage objects providers send
// are decoded by the scanner, not handed to encoding/json.
func TestScanRawUsageTakesProviderShapes(t *testing.T) {
	for _, s := range usageSeeds[:4] {
		if _, ok := scanRawUsage([]byte(s)); !ok {
			t.Errorf("scanner gave up on %s", s)
		}
	}
	if raw, ok := Member([]byte(`{"id":"c","usage":{"prompt_tokens":1},"x":[1,{"a":null}]}`)); !ok || string(raw) != `{"prompt_tokens":1}` {
		t.Errorf("Member = %q, %v", raw, ok)
	}
}

func TestParseUsageAllocations(t *testing.T) {
	raw := []byte(usageSeeds[0])
	if n := testing.AllocsPerRun(100, func() { ParseUsage(raw) }); n > 1 {
		t.Errorf("ParseUsage allocates %.0f times per call, want at most 1", n)
	}
}

type dumped struct {
	R                  rawUsage
	P, C, I, O, CC, CR any
}

func dump(r rawUsage) dumped {
	d := func(p *int) any {
		if p == nil {
			return nil
		}
		return *p
	}
	return dumped{r, d(r.PromptTokens), d(r.CompletionTokens), d(r.InputTokens), d(r.OutputTokens), d(r.CacheCreationInputTokens), d(r.CacheReadInputTokens)}
}
