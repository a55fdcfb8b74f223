package llmrelay

import (
	"bytes"
	"os"
	"regexp"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// Every Caddyfile snippet in the README is as `caddy fmt` writes it, so
// operators can paste one into a formatted Caddyfile unchanged. (Syntax
// summaries with <placeholders> are fenced as text.)
func TestReadmeSnippetsAreFormatted(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```caddyfile\n(.*?)```").FindAllSubmatch(readme, -1)
	if len(blocks) == 0 {
		t.Fatal("no caddyfile snippets found")
	}
	for i, b := range blocks {
		if got := caddyfile.Format(b[1]); !bytes.Equal(got, b[1]) {
			t.Errorf("snippet %d is not caddy fmt clean; caddy fmt gives:\n%s", i+1, got)
		}
	}
}

// The demo runs with no keys: it must listen on loopback only, never on
// every interface of the machine it is tried on.
func TestDemoListensOnLoopbackOnly(t *testing.T) {
	src, err := os.ReadFile("examples/demo.Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	listens := regexp.MustCompile(`"listen":\[[^\]]*\]`).FindAllString(string(out), -1)
	if len(listens) == 0 {
		t.Fatal("no listen addresses in the adapted demo")
	}
	for _, l := range listens {
		if !regexp.MustCompile(`^"listen":\["127\.0\.0\.1:\d+"\]$`).MatchString(l) {
			t.Errorf("demo listens on %s; want 127.0.0.1 only (bind 127.0.0.1)", l)
		}
	}
}
