// Package inproc holds what the repo's commands (relaybench, relaychaos,
// smoothreport) need to run Caddy in their own process: free loopback
// ports and a Caddyfile adapted to JSON for caddy.Load.
package inproc

import (
	"fmt"
	"io"
	"net"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile" // registers the caddyfile adapter
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
