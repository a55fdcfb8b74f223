package llmrelay_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/caddyserver/certmagic"
)

// TestMain keeps the tests' saved relay state (durable.go) out of the
// user's Caddy data directory, and lets a test start this binary as a
// Caddy of its own (fleet_e2e_test.go), for what only a separate process
// shows: a restart, and two instances sharing state.
func TestMain(m *testing.M) {
	if os.Getenv("LLM_RELAY_TEST_CADDY") == "1" {
		caddycmd.Main()
		return
	}
	dir, err := os.MkdirTemp("", "relay-test-data-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_DATA_HOME", dir)
	os.Setenv("XDG_CONFIG_HOME", dir)
	caddy.DefaultStorage = &certmagic.FileStorage{Path: filepath.Join(dir, "caddy")}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
