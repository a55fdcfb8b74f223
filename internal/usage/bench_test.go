package usage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// benchText is about 1 KB of the corpus of a category, repeated to size.
func benchText(b *testing.B, files ...string) []byte {
	var buf bytes.Buffer
	for buf.Len() < 1024 {
		for _, f := range files {
			t, err := os.ReadFile("testdata/corpus/" + f)
			if err != nil {
				b.Fatal(err)
			}
			buf.Write(t)
		}
	}
	return buf.Bytes()
}

// BenchmarkEstimateTokens reports ns per KB of text (ns/KB) by kind.
func BenchmarkEstimateTokens(b *testing.B) {
	for _, tc := range []struct {
		name  string
		files []string
	}{
		{"english", []string{"english_prose1.txt", "english_tech1.txt"}},
		{"code", []string{"code_go2.txt"}},
		{"cjk", []string{"cjk_zh2.txt", "cjk_ja2.txt"}},
		{"mixed", []string{"mixed_zh_en1.txt", "mixed_chat1.txt"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			text := benchText(b, tc.files...)
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				EstimateTokens(text)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(text))*1024, "ns/KB")
		})
	}
}

// promptBody4K is a chat request body of about 4 KB: a system prompt and
// turns of English prose, code and Chinese.
func promptBody4K(b *testing.B) []byte {
	type msg struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	read := func(f string) string {
		t, err := os.ReadFile("testdata/corpus/" + f)
		if err != nil {
			b.Fatal(err)
		}
		return string(t)
	}
	msgs := []msg{
		{"system", "You are a helpful assistant. Answer concisely."},
		{"user", read("english_prose1.txt")},
		{"assistant", read("english_prose2.txt")},
		{"user", "Explain this code:\n" + read("code_go1.txt")},
		{"assistant", read("cjk_zh2.txt")},
	}
	body, _ := json.Marshal(map[string]any{"model": "gpt-4o", "stream": true, "messages": msgs})
	if len(body) < 3800 || len(body) > 4600 {
		b.Fatalf("body of %d bytes", len(body))
	}
	return body
}

// BenchmarkEstimatePrompt compares the streaming scan with decoding the body
// with encoding/json into a minimal struct and estimating the strings.
func BenchmarkEstimatePrompt(b *testing.B) {
	body := promptBody4K(b)
	b.Run("scan", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			EstimatePrompt(body)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			var req struct {
				Messages []struct {
					Content json.RawMessage `json:"content"`
				} `json:"messages"`
			}
			if err := json.Unmarshal(body, &req); err != nil {
				b.Fatal(err)
			}
			n := 0
			for _, m := range req.Messages {
				var s string
				if json.Unmarshal(m.Content, &s) == nil {
					n += EstimateTokens([]byte(s)) + perMessageTokens
				}
			}
			_ = n
		}
	})
}

func BenchmarkLedgerAdd(b *testing.B) {
	now := time.Date(2025, 3, 14, 10, 0, 0, 0, time.UTC)
	u := Usage{Prompt: 1200, Completion: 300, Reasoning: 100, Cached: 1024}
	b.Run("serial", func(b *testing.B) {
		l := NewLedger()
		l.SetBudget("k", Budget{Limit: 1e6})
		b.ReportAllocs()
		for b.Loop() {
			l.Add("k", 0.0012, u, now)
		}
	})
	b.Run("parallel-16-keys", func(b *testing.B) {
		l := NewLedger()
		keys := make([]string, 16)
		for i := range keys {
			keys[i] = fmt.Sprintf("key-%d", i)
			l.SetBudget(keys[i], Budget{Limit: 1e6})
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				l.Add(keys[i%len(keys)], 0.0012, u, now)
				i++
			}
		})
	})
	b.Run("allow", func(b *testing.B) {
		l := NewLedger()
		l.SetBudget("k", Budget{Limit: 1e6})
		b.ReportAllocs()
		for b.Loop() {
			l.Allow("k", now)
		}
	})
}

func BenchmarkPriceTableLookup(b *testing.B) {
	m := map[string]Price{}
	for _, base := range []string{"gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini", "gpt-4.1-nano", "o3", "o3-mini", "o4-mini", "gpt-5", "gpt-5-mini", "deepseek-chat", "deepseek-reasoner"} {
		m[base] = Price{Input: 1, Output: 2}
		m[base+"*"] = Price{Input: 1, Output: 2}
	}
	t := NewPriceTable(m)
	for _, model := range []string{"gpt-4o-mini", "gpt-4o-mini-2024-07-18", strings.Repeat("x", 20)} {
		b.Run(model, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				t.Lookup(model)
			}
		})
	}
}
