package tagged

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/thinktag"
)

// corpusCase is testdata/corpus/NAME.json: how to read NAME.sse, and
// what it carries (see testdata/README.md).
type corpusCase struct {
	Origin string
	Config struct {
		Tags              [][2]string
		StartsInReasoning bool     `json:"starts_in_reasoning"`
		AtStart           bool     `json:"at_start"`
		EndMarkers        []string `json:"end_markers"`
		KeepNewlines      bool     `json:"keep_newlines"`
	}
	// Unchanged: the stream comes out byte for byte as it came.
	Unchanged bool
	Want      struct {
		Reasoning, Answer string
		Blocks            int
		Unclosed          bool
	}
}

func (c *corpusCase) syntax(t *testing.T) *thinktag.Syntax {
	cfg := thinktag.Config{StartsInReasoning: c.Config.StartsInReasoning, AtStart: c.Config.AtStart,
		EndMarkers: c.Config.EndMarkers, KeepNewlines: c.Config.KeepNewlines}
	for _, tg := range c.Config.Tags {
		cfg.Tags = append(cfg.Tags, thinktag.Tag{Open: tg[0], Close: tg[1]})
	}
	syn, err := thinktag.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return syn
}

// assemble is what an OpenAI SDK's accumulator makes of a stream's
// events (chat.Assembler).
func assemble(datas [][]byte) chat.Completion {
	var a chat.Assembler
	for _, d := range datas {
		a.Add(d, 0, false)
	}
	return a.Completion(0, false)
}

// TestCorpus reads each stream of testdata/corpus and checks it against
// the split written by hand in its .json, against thinktag.Split of its
// whole content, and against the rules every stream keeps (checkStream);
// the assembled answer keeps the upstream's tool calls, finish_reason
// and usage.
func TestCorpus(t *testing.T) {
	files, _ := filepath.Glob("testdata/corpus/*.sse")
	if len(files) < 8 {
		t.Fatalf("%d streams in testdata/corpus", len(files))
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".sse")
		t.Run(name, func(t *testing.T) {
			stream, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			js, err := os.ReadFile(strings.TrimSuffix(f, ".sse") + ".json")
			if err != nil {
				t.Fatal(err)
			}
			var c corpusCase
			if err := json.Unmarshal(js, &c); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(c.Origin, "Hand-written") {
				t.Fatalf("origin %q", c.Origin)
			}
			syn := c.syntax(t)
			in := readAll(t, string(stream))
			var whole texts
			var inData [][]byte
			for _, ev := range in {
				_ = choiceTexts(ev.data, chat.FieldReasoningContent, &whole)
				inData = append(inData, ev.data)
			}
			for _, field := range fields {
				g := checkStream(t, string(stream), syn, field)
				if string(g.reasoning) != c.Want.Reasoning || string(g.content) != c.Want.Answer ||
					g.state.Blocks != c.Want.Blocks || g.state.Unclosed != c.Want.Unclosed {
					t.Fatalf("%s: got reasoning %q\n answer %q\n state %+v\nwant %+v", field, g.reasoning, g.content, g.state, c.Want)
				}
				checkSplit(t, g, syn, whole.content)
				out, _, _ := runSource(t, string(stream), syn, field)
				if c.Unchanged && rawOut(out) != string(stream) {
					t.Fatalf("changed:\n%s", rawOut(out))
				}
				var outData [][]byte
				for _, ev := range out {
					outData = append(outData, ev.data)
				}
				a, b := assemble(inData), assemble(outData)
				if len(a.Choices) != 1 || len(b.Choices) != 1 {
					t.Fatalf("choices: %d in, %d out", len(a.Choices), len(b.Choices))
				}
				am, bm := a.Choices[0].Message, b.Choices[0].Message
				if !reflect.DeepEqual(am.ToolCalls, bm.ToolCalls) || !reflect.DeepEqual(a.Choices[0].FinishReason, b.Choices[0].FinishReason) ||
					string(a.Usage) != string(b.Usage) || a.ID != b.ID || a.Model != b.Model {
					t.Fatalf("assembled in:\n%+v\nout:\n%+v", a, b)
				}
				if r := reasoningOf(bm, field); r != c.Want.Reasoning {
					t.Fatalf("assembled reasoning %q", r)
				}
				if got := ptr(bm.Content); got != c.Want.Answer {
					t.Fatalf("assembled content %q", got)
				}
			}
		})
	}
}

func ptr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
