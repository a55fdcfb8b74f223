package usage

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxPromptError bounds EstimatePrompt's error on each body in
// testdata/chat against o200k_base (measured: see the test's log).
const maxPromptError = 15.0

func TestEstimatePromptAccuracy(t *testing.T) {
	ref := loadReference(t)
	files, _ := filepath.Glob("testdata/chat/*.json")
	if len(files) == 0 {
		t.Fatal("no chat bodies")
	}
	var sum float64
	for _, f := range files {
		name := filepath.Base(f)
		r, ok := ref.Chat[name]
		if !ok {
			t.Fatalf("%s has no reference count: re-run testdata/refcounts.cjs", name)
		}
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got := EstimatePrompt(body)
		d := float64(got-r.O200k) / float64(r.O200k) * 100
		sum += math.Abs(d)
		t.Logf("%-18s bytes %5d  o200k %4d  cl100k %4d  estimate %4d  (%+.1f%% vs o200k)", name, len(body), r.O200k, r.CL100k, got, d)
		if math.Abs(d) > maxPromptError {
			t.Errorf("%s: estimate %d, o200k_base %d: off by %.0f%%", name, got, r.O200k, math.Abs(d))
		}
	}
	t.Logf("mean abs error: %.1f%% vs o200k_base", sum/float64(len(files)))
}

func TestEstimatePromptEscapes(t *testing.T) {
	text := "Héllo \"world\"\n\t日本語 😀 back\\slash / end"
	plain := EstimateTokens([]byte(text))
	content, _ := json.Marshal(text) // escapes " \ \n \t
	// The same string with every non-ASCII rune as \u escapes (as Python's
	// json.dumps writes it), surrogate pairs included.
	var ascii strings.Builder
	for _, r := range text {
		switch {
		case r < 0x80:
			b, _ := json.Marshal(string(r))
			ascii.Write(b[1 : len(b)-1])
		case r < 0x10000:
			ascii.WriteString(`\u` + hex(int(r), 4))
		default:
			r -= 0x10000
			ascii.WriteString(`\u` + hex(0xD800+int(r>>10), 4) + `\u` + hex(0xDC00+int(r&0x3FF), 4))
		}
	}
	for _, c := range []string{string(content), `"` + ascii.String() + `"`} {
		body := `{"model":"m","messages":[{"role":"user","content":` + c + `}]}`
		if got, want := EstimatePrompt([]byte(body)), plain+perMessageTokens+replyTokens; got != want {
			t.Errorf("content %s: %d tokens, want %d", c, got, want)
		}
	}
}

func sumTokens(s ...string) int {
	n := 0
	for _, s := range s {
		n += EstimateTokens([]byte(s))
	}
	return n
}

func hex(v, n int) string {
	const digits = "0123456789abcdef"
	b := make([]byte, n)
	for i := n - 1; i >= 0; i-- {
		b[i] = digits[v&15]
		v >>= 4
	}
	return string(b)
}

func TestEstimatePromptShapes(t *testing.T) {
	hello := EstimateTokens([]byte("Hello there, how are you?"))
	for _, tc := range []struct {
		name, body string
		want       int
	}{
		{"one message", `{"messages":[{"role":"user","content":"Hello there, how are you?"}]}`, hello + 4 + 3},
		{"white space", " {\n \"messages\" : [ { \"role\" : \"user\" , \"content\" : \"Hello there, how are you?\" } ] ,\n \"stream\" : true } ", hello + 4 + 3},
		{"parts", `{"messages":[{"role":"user","content":[{"type":"text","text":"Hello there, how are you?"},{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"low"}},{"text":"Hello there, how are you?","type":"text"}]}]}`, 2*hello + 4 + 3},
		{"null content", `{"messages":[{"role":"assistant","content":null}]}`, 4 + 3},
		{"name", `{"messages":[{"role":"user","name":"bob","content":""}]}`, 1 + 1 + 4 + 3},
		{"two messages, other members", `{"model":"gpt-4o","temperature":0.5,"stop":["\n",null],"messages":[{"role":"system","content":"Hello there, how are you?"},{"role":"user","content":"Hello there, how are you?"}],"metadata":{"a":{"b":[1,2,{}]}}}`, 2*hello + 8 + 3},
		{"tools", `{"messages":[],"tools":[{"type":"function","function":{"name":"f"}}]}`, 3 + toolsTokens + sumTokens("type", "function", "function", "name", "f")},
		{"no tools", `{"messages":[],"tools":[]}`, 3},
		{"tool calls", `{"messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"city\":\"Paris\"}"}}]}]}`, 4 + 3 + sumTokens("id", "c1", "type", "function", "function", "name", "f", "arguments", `{"city":"Paris"}`)},
		{"empty messages", `{"messages":[]}`, 3},
		{"messages not objects", `{"messages":["x",1,[2]]}`, 3},
	} {
		if got := EstimatePrompt([]byte(tc.body)); got != tc.want {
			t.Errorf("%s: %d tokens, want %d", tc.name, got, tc.want)
		}
		if !json.Valid([]byte(tc.body)) {
			t.Errorf("%s: test body is not valid JSON", tc.name)
		}
	}
}

// TestEstimatePromptMalformed checks that a body that is not a chat request
// falls back to the plain-text estimate, and that cut-off bodies never
// panic.
func TestEstimatePromptMalformed(t *testing.T) {
	for _, body := range []string{
		``, `null`, `[]`, `{}`, `{"model":"x"}`, `{"messages":`, `{"messages":[{"content":"abc`,
		`{"messages":[{"content":"a\u12"}]}`, `{"messages":[{"content":"a"}]`, `{"messages":[{"content":"a"},]}`,
		`{"messages":[{"content" "a"}]}`, `not json at all, just some words`,
	} {
		if got, want := EstimatePrompt([]byte(body)), EstimateTokens([]byte(body)); got != want {
			t.Errorf("%q: %d tokens, want the plain-text estimate %d", body, got, want)
		}
	}
	body, _ := os.ReadFile("testdata/chat/tools.json")
	for i := range body {
		EstimatePrompt(body[:i])
	}
}

func TestEstimatePromptNoAlloc(t *testing.T) {
	body, err := os.ReadFile("testdata/chat/code_review.json")
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { EstimatePrompt(body) }); n != 0 {
		t.Errorf("EstimatePrompt allocates %.0f times", n)
	}
}

func FuzzEstimatePrompt(f *testing.F) {
	for _, name := range []string{"simple.json", "tools.json", "parts_zh.json"} {
		b, _ := os.ReadFile(filepath.Join("testdata/chat", name))
		f.Add(b)
	}
	f.Add([]byte(`{"messages":[{"content":"\ud83d\ude00 \ud800 \u00e9"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		n := EstimatePrompt(body)
		if n < 0 || n > len(body)+replyTokens+perMessageTokens*bytes.Count(body, []byte("{")) {
			t.Fatalf("EstimatePrompt = %d for %d bytes", n, len(body))
		}
	})
}
