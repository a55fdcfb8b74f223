package splice

import "testing"

func TestOverlap(t *testing.T) {
	cases := []struct {
		sent, next string
		max, want  int
	}{
		{"The answer is forty-two", "is forty-two, because", 0, len("is forty-two")},
		{"The answer is 1", "1 more", 0, 0},        // shorter than MinOverlap: kept
		{"Hello there ", "  world", 0, 2},          // the seam's space once
		{"Hello there", " world", 0, 0},            // no space sent: kept
		{"abcdefghij", "abcdefghij and on", 0, 10}, // all of sent repeated
		{"xx abcdefghij", "abcdefghij and on", 0, len("abcdefghij")},
		{"xx abcdefghij", "abcdefghij and on", 5, 0},                  // beyond max
		{"xx abcdefghij", "abcdefghij and on", -1, 0},                 // off
		{"über die straße!", "die straße! ok", 0, len("die straße!")}, // runes, not bytes
	}
	for _, c := range cases {
		if got := Overlap(c.sent, c.next, c.max); got != c.want {
			t.Errorf("Overlap(%q, %q, %d) = %d, want %d", c.sent, c.next, c.max, got, c.want)
		}
	}
}

func TestDecided(t *testing.T) {
	cases := []struct {
		sent, next string
		want       bool
	}{
		{"xx abcdefghij", "abc", false},       // may grow into the repeat
		{"xx abcdefghij", "abcdefghij", true}, // the whole tail: decided
		{"xx abcdefghij", "zzz", true},        // not a repeat's start
		{"sent ", "  ", false},                // whitespace only
		{"", "anything", true},
	}
	for _, c := range cases {
		if got := Decided(c.sent, c.next, 0); got != c.want {
			t.Errorf("Decided(%q, %q) = %v, want %v", c.sent, c.next, got, c.want)
		}
	}
}

func FuzzOverlap(f *testing.F) {
	f.Add("The answer is forty-two", "is forty-two, because", 0)
	f.Add("a ", " b", 3)
	f.Fuzz(func(t *testing.T, sent, next string, max int) {
		n := Overlap(sent, next, max%512)
		if n < 0 || n > len(next) {
			t.Fatalf("Overlap = %d, outside 0..%d", n, len(next))
		}
	})
}
