package gemini

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
)

// TestKeepNative: what the Chat pivot drops (safetySettings, topK,
// includeThoughts without a budget) reaches a Gemini target after the
// round trip through Chat; what the relay set on the way stands.
func TestKeepNative(t *testing.T) {
	native := `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],
	  "safetySettings":[{"category":"HARM_CATEGORY_HARASSMENT","threshold":"BLOCK_NONE"}],
	  "generationConfig":{"topK":7,"temperature":0.5,"thinkingConfig":{"includeThoughts":true}}}`
	chatBody, err := ToChatRequest([]byte(native), chat.Options{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	translated, err := FromChatRequest(chatBody, chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(translated), "safetySettings") || strings.Contains(string(translated), "topK") {
		t.Fatalf("the pivot kept them after all (then KeepNative is not needed): %s", translated)
	}
	got, err := KeepNative(translated, []byte(native))
	if err != nil {
		t.Fatal(err)
	}
	var req struct {
		Contents         json.RawMessage
		SafetySettings   []map[string]string
		GenerationConfig struct {
			TopK           int
			Temperature    float64
			ThinkingConfig struct{ IncludeThoughts bool }
		}
	}
	if err := json.Unmarshal(got, &req); err != nil {
		t.Fatal(err)
	}
	if len(req.SafetySettings) != 1 || req.SafetySettings[0]["threshold"] != "BLOCK_NONE" || req.GenerationConfig.TopK != 7 ||
		req.GenerationConfig.Temperature != 0.5 || !req.GenerationConfig.ThinkingConfig.IncludeThoughts || !strings.Contains(string(req.Contents), `"hi"`) {
		t.Fatalf("not kept: %s", got)
	}

	// The relay turned thinking off on the way (budget 0): it stands,
	// and so does a value the translation set.
	off := `{"contents":[],"generationConfig":{"topK":3,"thinkingConfig":{"thinkingBudget":0}}}`
	got, err = KeepNative([]byte(off), []byte(native))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(got), "includeThoughts") || !strings.Contains(string(got), `"topK":3`) {
		t.Fatalf("overrode the relay's settings: %s", got)
	}
	// A translation that is not an object (null) is an error, not a
	// panic on its nil map.
	if got, err := KeepNative([]byte("null"), []byte(native)); err == nil {
		t.Fatalf("null: %s, want an error", got)
	}
	// Nothing to keep: the translation as it is, byte for byte.
	plain := []byte(`{"contents":[] }`)
	if got, err := KeepNative(plain, []byte(`{"contents":[]}`)); err != nil || string(got) != string(plain) {
		t.Fatalf("%s %v", got, err)
	}
}

// FuzzKeepNative: whatever the bodies, KeepNative errs or returns JSON,
// and never drops a member of the translation.
func FuzzKeepNative(f *testing.F) {
	f.Add([]byte(`{"contents":[],"generationConfig":{"thinkingConfig":{"thinkingBudget":0}}}`), []byte(`{"safetySettings":[],"generationConfig":{"topK":1,"thinkingConfig":{"includeThoughts":true}}}`))
	f.Add([]byte(`{"generationConfig":null}`), []byte(`{"generationConfig":{"topK":null}}`))
	f.Add([]byte(`null`), []byte(`{"safetySettings":[]}`))
	f.Fuzz(func(t *testing.T, translated, native []byte) {
		got, err := KeepNative(translated, native)
		if err != nil {
			return
		}
		if bytes.Equal(got, translated) {
			return // nothing to keep: the translation untouched
		}
		var in, out map[string]json.RawMessage
		if json.Unmarshal(got, &out) != nil {
			t.Fatalf("not JSON: %s", got)
		}
		if json.Unmarshal(translated, &in) != nil {
			return // returned untouched: not ours to check
		}
		for k := range in {
			if _, ok := out[k]; !ok {
				t.Fatalf("dropped %q: %s → %s", k, translated, got)
			}
		}
	})
}
