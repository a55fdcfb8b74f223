package thinktag

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// corpusCase is one testdata/corpus/NAME.json: a text as an upstream's
// content carried it, in pieces (or whole, with byte offsets to cut it
// at), and the configuration to read it with. NAME.want.json beside it is
// the split expected, written by hand.
type corpusCase struct {
	Origin string `json:"origin"`
	Config struct {
		Tags              [][2]string `json:"tags"`
		StartsInReasoning bool        `json:"starts_in_reasoning"`
		AtStart           bool        `json:"at_start"`
		EndMarkers        []string    `json:"end_markers"`
		KeepNewlines      bool        `json:"keep_newlines"`
	} `json:"config"`
	Pieces []string `json:"pieces"`
	Text   string   `json:"text"`
	Cuts   []int    `json:"cuts"`
}

type corpusWant struct {
	Reasoning string `json:"reasoning"`
	Answer    string `json:"answer"`
	Blocks    int    `json:"blocks"`
	Unclosed  bool   `json:"unclosed"`
}

// TestCorpus checks every stream of testdata/corpus against its expected
// split: in its own pieces, whole, byte by byte, cut at every offset, and
// by the reference.
func TestCorpus(t *testing.T) {
	files, err := filepath.Glob("testdata/corpus/*.json")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, file := range files {
		if strings.HasSuffix(file, ".want.json") {
			continue
		}
		n++
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run(name, func(t *testing.T) {
			var c corpusCase
			var w corpusWant
			readJSON(t, file, &c)
			readJSON(t, strings.TrimSuffix(file, ".json")+".want.json", &w)
			cfg := Config{
				StartsInReasoning: c.Config.StartsInReasoning,
				AtStart:           c.Config.AtStart,
				EndMarkers:        c.Config.EndMarkers,
				KeepNewlines:      c.Config.KeepNewlines,
			}
			for _, tg := range c.Config.Tags {
				cfg.Tags = append(cfg.Tags, Tag{tg[0], tg[1]})
			}
			s, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var pieces [][]byte
			text := c.Text
			if c.Pieces != nil {
				text = strings.Join(c.Pieces, "")
				for _, p := range c.Pieces {
					pieces = append(pieces, []byte(p))
				}
			} else {
				pieces = cut(text, c.Cuts...)
			}
			want := result{w.Reasoning, w.Answer, w.Blocks, w.Unclosed}
			if got := feedCfg(t, s, &cfg, pieces...); got != want {
				t.Fatalf("in its pieces:\n got %+v\nwant %+v", got, want)
			}
			if got := reference(cfg, text); got != want {
				t.Fatalf("reference:\n got %+v\nwant %+v", got, want)
			}
			var bytewise [][]byte
			for i := range len(text) {
				bytewise = append(bytewise, []byte(text[i:i+1]))
			}
			if got := feedCfg(t, s, &cfg, bytewise...); got != want {
				t.Fatalf("byte by byte:\n got %+v\nwant %+v", got, want)
			}
			for i := 0; i <= len(text); i++ {
				if got := feed(t, s, cut(text, i)...); got != want {
					t.Fatalf("cut at %d:\n got %+v\nwant %+v", i, got, want)
				}
			}
		})
	}
	if n < 10 {
		t.Fatalf("%d corpus streams, want at least 10", n)
	}
}

func readJSON(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}
