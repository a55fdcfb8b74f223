// Package inproc holds what the repo's commands (relaybench, relaychaos,
// smoothreport) need to run Caddy in their own process: free loopback
// ports and a Caddyfile adapted to JSON for caddy.Load.
package inproc

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile" // registers the caddyfile adapter
	"github.com/caddyserver/certmagic"
)

// FreePorts returns n distinct ports that were free on 127.0.0.1 a moment
// ago. All n listeners are held open together so the kernel cannot hand
// out the same port twice.
func FreePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Adapt turns a Caddyfile into the JSON config caddy.Load takes. filename
// names it in errors; warnings go to warn (nil: dropped).
func Adapt(src, filename string, warn io.Writer) ([]byte, error) {
	adapter := caddyconfig.GetAdapter("caddyfile")
	if adapter == nil {
		return nil, fmt.Errorf("the caddyfile config adapter is not registered")
	}
	cfg, warnings, err := adapter.Adapt([]byte(src), map[string]any{"filename": filename})
	if err != nil {
		return nil, fmt.Errorf("adapting the Caddyfile: %w\n%s", err, src)
	}
	if warn != nil {
		for _, w := range warnings {
			fmt.Fprintf(warn, "caddyfile warning: %s\n", w.String())
		}
	}
	return cfg, nil
}

// PrivateData points Caddy's data and config directories, and its default
// storage, at a fresh temporary directory, and returns a function that
// removes it. The relay saves its state (spend, canaries, ejections) in
// that storage and restores it at start: a measurement or a chaos run
// must neither start from an earlier run's state nor leave its own in
// the user's Caddy data directory. Call it first in main: child processes
// inherit the environment.
func PrivateData() (cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "relay-data-")
	if err != nil {
		return nil, fmt.Errorf("making a data directory: %w", err)
	}
	os.Setenv("XDG_DATA_HOME", filepath.Join(dir, "data"))
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	caddy.DefaultStorage = &certmagic.FileStorage{Path: caddy.AppDataDir()}
	return func() { os.RemoveAll(dir) }, nil
}
