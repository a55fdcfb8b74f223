package llmrelay_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/caddytest"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/llmrelay/caddy-llm-relay"
)

// TestCaddyfileAdapt adapts every testdata/*.caddyfiletest in-process (no
// Caddy server is started) and compares the result, the way Caddy's own
// caddytest/integration/caddyfile_adapt_test.go does.
//
// Each file holds a Caddyfile, a line of exactly `----------`, then either
// the expected JSON (pretty-printed with tabs, as `caddy adapt --pretty`
// prints it) or, when that part does not start with `{`, a substring the
// adapt error must contain. Expected errors must name the line
// (`Caddyfile:<n>`), so every bad-input file pins where the error points.
//
// To add a case: write the Caddyfile, run
//
//	go run ./cmd/caddy adapt --config X --adapter caddyfile --pretty
//
// read the JSON and check it says what the Caddyfile means, then paste it
// below the separator.
func TestCaddyfileAdapt(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.caddyfiletest"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no testdata/*.caddyfiletest files found")
	}

	winNewlines := regexp.MustCompile(`\r?\n`)
	separator := regexp.MustCompile(`(?m)^----------$`)
	caddyfileLine := regexp.MustCompile(`\bCaddyfile:\d+\b`)

	for _, path := range files {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			text := winNewlines.ReplaceAllString(string(data), "\n")

			parts := separator.Split(text, -1)
			if len(parts) != 2 {
				t.Fatalf("%s: want exactly one line of `----------` separating the Caddyfile from the expected output, found %d", name, len(parts)-1)
			}
			// As Caddy does: trailing newline to match the formatter's
			// expectations, so a well-formatted file adapts without warnings.
			caddyfile, expected := strings.TrimSpace(parts[0])+"\n", strings.TrimSpace(parts[1])
			if expected == "" {
				t.Fatalf("%s: nothing after the separator; put the expected JSON or error substring there", name)
			}

			adapter := caddyconfig.GetAdapter("caddyfile")
			if adapter == nil {
				t.Fatal("caddyfile adapter is not registered")
			}

			if expected[0] == '{' {
				// The documented examples must be clean: no adapter warnings
				// (unformatted input, ignored settings and so on).
				_, warnings, err := adapter.Adapt([]byte(caddyfile), nil)
				if err != nil {
					t.Fatalf("%s: adapting failed: %v", name, err)
				}
				for _, w := range warnings {
					t.Errorf("%s: adapter warning at Caddyfile:%d (%s): %s", name, w.Line, w.Directive, w.Message)
				}
				// CompareAdapt prints a line diff (- expected, + actual) to
				// stdout when the JSON differs.
				if !caddytest.CompareAdapt(t, name, caddyfile, "caddyfile", expected) {
					t.Errorf("%s: adapted JSON differs from the expected JSON (diff above: - expected, + actual)", name)
				}
				return
			}

			if !caddyfileLine.MatchString(expected) {
				t.Fatalf("%s: the expected error %q must name the line, e.g. `..., at Caddyfile:7`", name, expected)
			}
			result, _, err := adapter.Adapt([]byte(caddyfile), nil)
			if err == nil {
				t.Fatalf("%s: expected an error containing\n\t%s\nbut the Caddyfile adapted without error to:\n%s", name, expected, result)
			}
			got := winNewlines.ReplaceAllString(err.Error(), "\n")
			if !strings.Contains(got, expected) {
				t.Errorf("%s: expected the error to contain:\n\t%s\nbut got:\n\t%s", name, expected, got)
			}
		})
	}
}
