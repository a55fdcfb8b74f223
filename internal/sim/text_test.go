package sim

import (
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestVocabulary(t *testing.T) {
	var all []string
	total := 0
	for _, class := range vocabulary {
		all = append(all, class.pieces...)
		total += class.weight
	}
	if total != 100 {
		t.Errorf("weights sum to %d, want 100", total)
	}
	has := func(name string, pred func(string) bool) {
		t.Helper()
		if !slices.ContainsFunc(all, pred) {
			t.Errorf("vocabulary has no %s", name)
		}
	}
	has("CJK", func(p string) bool {
		return strings.ContainsFunc(p, func(r rune) bool { return unicode.Is(unicode.Han, r) })
	})
	has("ZWJ emoji", func(p string) bool { return strings.Contains(p, "\u200d") })
	has("flag", func(p string) bool { return strings.ContainsRune(p, '🇯') })
	has("skin tone", func(p string) bool { return strings.ContainsRune(p, '\U0001F3FD') })
	has("precomposed é", func(p string) bool { return strings.ContainsRune(p, 'é') })
	has("combining acute", func(p string) bool { return strings.ContainsRune(p, '\u0301') })
	has("newline", func(p string) bool { return strings.Contains(p, "\n") })
	has("leading-space word", func(p string) bool { return p == " the" })
	for _, p := range all {
		if p == "" || !utf8.ValidString(p) {
			t.Errorf("bad piece %q", p)
		}
	}
}

func TestTexts(t *testing.T) {
	r, c := Texts(Config{})
	if len(r) != DefaultReasoningTokens || len(c) != DefaultContentTokens {
		t.Fatalf("default lengths %d, %d", len(r), len(c))
	}
	for _, p := range append(r, c...) {
		if !utf8.ValidString(p) {
			t.Errorf("invalid UTF-8 piece %q", p)
		}
	}
	// The default text exercises non-ASCII output.
	if full := strings.Join(append(r, c...), ""); !strings.ContainsFunc(full, func(r rune) bool { return r > unicode.MaxASCII }) {
		t.Errorf("default text is ASCII only: %q", full)
	}

	r2, c2 := Texts(Config{Seed: DefaultSeed})
	if !slices.Equal(r, r2) || !slices.Equal(c, c2) {
		t.Error("Texts is not a pure function of the config")
	}
	r3, _ := Texts(Config{Seed: 2})
	if slices.Equal(r, r3) {
		t.Error("seed does not change the text")
	}
	// The content does not depend on the reasoning length.
	r4, c4 := Texts(Config{ReasoningTokens: new(0), ContentTokens: new(5)})
	if len(r4) != 0 || !slices.Equal(c4, c[:5]) {
		t.Errorf("phases are not independent: %q vs %q", c4, c[:5])
	}
}
