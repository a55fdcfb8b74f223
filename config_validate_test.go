package llmrelay_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// TestJSONConfigValidation loads every testdata/json/*.jsontest with
// caddy.Validate, which provisions and validates every module exactly as
// `caddy validate`, `caddy run --config x.json` and the admin API do, with
// no Caddyfile in the way. No server is started.
//
// Each file holds one handler object (the JSON of one route's handle
// entry), a line of exactly `----------`, then the text the load error
// must contain, or `OK` for a config that must load. The expected errors
// name the field and say how to fix it: a JSON config has no line
// numbers to point at.
func TestJSONConfigValidation(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "json", "*.jsontest"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no testdata/json/*.jsontest files found")
	}
	separator := regexp.MustCompile(`(?m)^----------$`)
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			parts := separator.Split(string(data), -1)
			if len(parts) != 2 {
				t.Fatalf("want one `----------` line, found %d", len(parts)-1)
			}
			handler, want := strings.TrimSpace(parts[0]), strings.TrimSpace(parts[1])
			if !json.Valid([]byte(handler)) {
				t.Fatalf("the handler part is not valid JSON:\n%s", handler)
			}
			cfg := `{"admin": {"disabled": true}, "apps": {"http": {"servers": {"s": {"listen": ["127.0.0.1:0"], "routes": [{"handle": [` + handler + `]}]}}}}}`
			var c caddy.Config
			if err := json.Unmarshal([]byte(cfg), &c); err != nil {
				t.Fatalf("decoding the config: %v", err)
			}
			err = caddy.Validate(&c)
			if want == "OK" {
				if err != nil {
					t.Fatalf("want the config to load, got: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("the config validated, want an error containing:\n\t%s", want)
			}
			if !strings.Contains(err.Error(), want) {
				t.Errorf("want the error to contain:\n\t%s\ngot:\n\t%v", want, err)
			}
		})
	}
}
