package gemini

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// TestEndpoints: countTokens in both shapes, its answer, the models list.
func TestEndpoints(t *testing.T) {
	for _, body := range []string{
		`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`,
		`{"generateContentRequest":{"model":"models/x","contents":[{"role":"user","parts":[{"text":"hi"}]}]}}`,
	} {
		req, err := CountTokensRequest([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		out, err := ToChatRequest(req, chat.Options{Model: "m"})
		if err != nil || !strings.Contains(string(out), `"content":"hi"`) {
			t.Fatalf("%s: %s %v", body, out, err)
		}
	}
	if got := string(CountTokensAnswer(42)); got != `{"totalTokens":42}` {
		t.Fatal(got)
	}
	var list struct {
		Models []struct {
			Name    string   `json:"name"`
			Methods []string `json:"supportedGenerationMethods"`
		} `json:"models"`
	}
	if err := json.Unmarshal(ModelsList([]string{"budget", "models/coder"}), &list); err != nil || len(list.Models) != 2 ||
		list.Models[0].Name != "models/budget" || list.Models[1].Name != "models/coder" || len(list.Models[0].Methods) != 3 {
		t.Fatalf("%+v %v", list, err)
	}
}

// TestJSONArray: a translated stream as the JSON array a client without
// alt=sse reads: one valid array of the same chunks, an error included.
func TestJSONArray(t *testing.T) {
	role := `data: {"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n"
	text := `data: {"id":"c","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}` + "\n\n"
	for name, tail := range map[string]string{
		"done":  "data: [DONE]\n\n",
		"error": `data: {"error":{"message":"boom","type":"server_error"}}` + "\n\n",
		"empty": "",
	} {
		t.Run(name, func(t *testing.T) {
			in := role + text + tail
			if name == "empty" {
				in = role
			}
			evs, err := drain(JSONArray(FromChatStream(reader(in), chat.Options{Model: "m"})))
			if err == nil || err.Error() != "EOF" {
				t.Fatal(err)
			}
			var all []byte
			for _, ev := range evs {
				all = append(all, ev.Raw...)
			}
			var arr []map[string]any
			if err := json.Unmarshal(all, &arr); err != nil {
				t.Fatalf("not a JSON array: %v\n%s", err, all)
			}
			want := map[string]int{"done": 2, "error": 2, "empty": 0}[name]
			if len(arr) != want {
				t.Fatalf("%d elements, want %d: %s", len(arr), want, all)
			}
			if name == "error" && arr[1]["error"] == nil {
				t.Fatalf("the error is not the last element: %s", all)
			}
		})
	}
}

// repeatSource yields ev for ever.
type repeatSource struct{ ev sse.Event }

func (r *repeatSource) Next() (sse.Event, error) { return r.ev, nil }

// TestJSONArrayAllocs: an element is built once, in the array's reused
// buffer, and handed out from it (valid until the next call, as every
// Source's event): no allocation per chunk.
func TestJSONArrayAllocs(t *testing.T) {
	src := JSONArray(&repeatSource{ev: streamEvents.Event("", []byte(`{"candidates":[]}`))})
	if _, err := src.Next(); err != nil {
		t.Fatal(err)
	}
	n := testing.AllocsPerRun(100, func() {
		if ev, err := src.Next(); err != nil || string(ev.Raw) != ",\r\n"+`{"candidates":[]}` || string(ev.Data) != `{"candidates":[]}` {
			t.Fatalf("%q %q %v", ev.Raw, ev.Data, err)
		}
	})
	if n != 0 {
		t.Errorf("%v allocations per element, want 0", n)
	}
}
