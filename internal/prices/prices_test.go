package prices

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestList(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range List {
		if len(e.Names) == 0 {
			t.Errorf("an entry has no name: %+v", e)
		}
		for _, n := range e.Names {
			if seen[n] {
				t.Errorf("%s is listed twice", n)
			}
			seen[n] = true
			if withoutSnapshot(n) != n || strings.Contains(n, "/") {
				t.Errorf("%s: list the base name; Lookup strips prefixes and snapshot dates", n)
			}
		}
		if !strings.HasPrefix(e.Source, "https://") {
			t.Errorf("%v: source %q is not an https address", e.Names, e.Source)
		}
		if _, err := time.Parse("2006-01-02", e.Taken); err != nil {
			t.Errorf("%v: taken %q is not a date", e.Names, e.Taken)
		}
		if e.Input <= 0 || e.Output <= 0 || e.CachedInput < 0 || e.CacheWrite < 0 {
			t.Errorf("%v: prices must be positive (cached and cache write 0 or more): %+v", e.Names, e)
		}
		if e.CachedInput > e.Input {
			t.Errorf("%v: cached input %v above input %v", e.Names, e.CachedInput, e.Input)
		}
	}
}

func TestLookup(t *testing.T) {
	for _, c := range []struct{ model, want string }{
		{"gpt-5", "gpt-5"},
		{"gpt-5-2025-08-07", "gpt-5"},
		{"gpt-5-mini", "gpt-5-mini"},
		{"gpt-5-mini-2025-08-07", "gpt-5-mini"},
		{"openai/gpt-5", "gpt-5"},
		{"openai/gpt-4.1-2025-04-14", "gpt-4.1"},
		{"claude-sonnet-4-5-20250929", "claude-sonnet-4-5"},
		{"claude-opus-4-1@20250805", "claude-opus-4-1"},
		{"anthropic/claude-sonnet-4.5", "claude-sonnet-4.5"},
		{"deepseek-reasoner", "deepseek-reasoner"},
		{"gemini-2.5-flash", "gemini-2.5-flash"},
		{"gemini-2.5-flash-lite", "gemini-2.5-flash-lite"},
	} {
		_, m, ok := Lookup(c.model)
		if !ok || m != c.want {
			t.Errorf("Lookup(%q) = %q, %v; want %q", c.model, m, ok, c.want)
		}
	}
	for _, model := range []string{"", "gpt", "gpt-5-turbo", "GPT-5", "gpt-5-mini-high", "claude-sonnet", "my-local-model",
		"gpt-5-20250807x", "gpt-5-2025-08", "/", "openai/"} {
		if _, m, ok := Lookup(model); ok {
			t.Errorf("Lookup(%q) matched %q; want no price", model, m)
		}
	}
	e, _, _ := Lookup("claude-haiku-4-5")
	if e.Input != 1 || e.Output != 5 || e.CachedInput != 0.10 || e.CacheWrite != 1.25 {
		t.Errorf("claude-haiku-4-5 = %+v", e)
	}
}

func FuzzLookup(f *testing.F) {
	for _, s := range []string{"gpt-5-2025-08-07", "openai/gpt-5", "a/b/c@20250101", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, model string) {
		e, m, ok := Lookup(model)
		if ok != (m != "") || ok && (e.Input <= 0 || !strings.Contains(model, m)) {
			t.Fatalf("Lookup(%q) = %+v, %q, %v", model, e, m, ok)
		}
	})
}

// snapshotRE is the rule withoutSnapshot implements by hand, as a
// regular expression: the reference the hand-written one must agree with.
var snapshotRE = regexp.MustCompile(`(?s)^(.+?)(-\d{4}-\d{2}-\d{2}|-\d{8}|@\d{8})$`)

func FuzzWithoutSnapshot(f *testing.F) {
	for _, s := range []string{"gpt-5-2025-08-07", "claude-sonnet-4-5-20250929", "claude-opus-4-1@20250805",
		"gpt-5", "-20250929", "x-2025-0807", "x@2025-08-07", "x-123456789", "a-1234-56-78", "o3-mini-2025-01-31"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		want := name
		if m := snapshotRE.FindStringSubmatch(name); m != nil {
			want = m[1]
		}
		if got := withoutSnapshot(name); got != want {
			t.Fatalf("withoutSnapshot(%q) = %q, want %q", name, got, want)
		}
	})
}
