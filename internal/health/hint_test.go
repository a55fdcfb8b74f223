package health

import (
	"strings"
	"testing"
)

func TestParseHint(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Hint
		err  string
	}{
		{"", Hint{}, ""},
		{"  ", Hint{}, ""},
		{"auto", Hint{Auto: true}, ""},
		{"AUTO", Hint{Auto: true}, ""},
		{"nrt", Hint{Region: "nrt"}, ""},
		{" nrt! ", Hint{Region: "nrt", Strict: true}, ""},
		{"eu-west-1!", Hint{Region: "eu-west-1", Strict: true}, ""},
		{"!", Hint{}, "needs a region code"},
		{"auto!", Hint{}, "cannot be pinned"},
		{"nrt!!", Hint{}, "one region code"},
		{"nrt, kix", Hint{}, "one region code"},
	} {
		got, err := ParseHint(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseHint(%q) = %+v, %v; want an error with %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseHint(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func FuzzParseHint(f *testing.F) {
	for _, s := range []string{"", "auto", "nrt", "nrt!", "!", "auto!", " x ! "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := ParseHint(s)
		if err != nil {
			return
		}
		if h.Strict && h.Region == "" || h.Auto && (h.Region != "" || h.Strict) {
			t.Fatalf("ParseHint(%q) = %+v", s, h)
		}
		if strings.ContainsAny(h.Region, "!, \t") {
			t.Fatalf("ParseHint(%q) kept a separator: %+v", s, h)
		}
		// What it parses to is what it says.
		back := h.String()
		if h.Strict {
			back += "!"
		}
		if again, err := ParseHint(back); err != nil || again != h {
			t.Fatalf("ParseHint(%q) = %+v, again %+v, %v", s, h, again, err)
		}
	})
}
