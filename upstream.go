package llmrelay

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
)

// upstreamRuntime is an Upstream ready to send requests: URL parsed,
// secrets resolved, transport loaded.
type upstreamRuntime struct {
	name      string
	region    string
	base      string // base URL without trailing slash, e.g. https://api.x.com/v1
	auth      string // "Bearer <key>", or "" when no api_key is set
	headers   http.Header
	transport http.RoundTripper
	cleanup   func() // at Cleanup: the default transport's own Cleanup (Caddy cleans up loaded modules itself)
	closeIdle func() // closes the transport's idle connections; idempotent
}

// provisionUpstream resolves the upstream's secrets and loads its transport
// (reverse_proxy's http transport by default, so operators get the same
// knobs and connection pooling they know).
func provisionUpstream(ctx caddy.Context, u *Upstream, repl *caddy.Replacer) (*upstreamRuntime, error) {
	base, err := url.Parse(u.BaseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("base_url %q must be an absolute http(s) URL such as https://api.openai.com/v1", u.BaseURL)
	}
	rt := &upstreamRuntime{
		name:    u.Name,
		region:  u.Region,
		base:    strings.TrimSuffix(base.String(), "/"),
		headers: make(http.Header, len(u.Headers)),
		cleanup: func() {},
	}
	if u.APIKey != "" {
		key, err := repl.ReplaceOrErr(u.APIKey, true, true)
		if err != nil {
			return nil, fmt.Errorf("resolving api_key: %w", err)
		}
		rt.auth = "Bearer " + key
	}
	for field, values := range u.Headers {
		for _, v := range values {
			resolved, err := repl.ReplaceOrErr(v, true, true)
			if err != nil {
				return nil, fmt.Errorf("resolving header %s: %w", field, err)
			}
			rt.headers.Add(field, resolved)
		}
	}

	var transport http.RoundTripper
	if u.TransportRaw != nil {
		mod, err := ctx.LoadModule(u, "TransportRaw")
		if err != nil {
			return nil, fmt.Errorf("loading transport: %w", err)
		}
		rtp, ok := mod.(http.RoundTripper)
		if !ok {
			return nil, fmt.Errorf("transport module %T is not an http.RoundTripper", mod)
		}
		transport = rtp
	} else {
		ht := new(reverseproxy.HTTPTransport)
		if err := ht.Provision(ctx); err != nil {
			return nil, fmt.Errorf("provisioning default transport: %w", err)
		}
		transport = ht
		rt.cleanup = func() { _ = ht.Cleanup() }
	}
	rt.transport = transport
	rt.closeIdle = idleCloser(transport)
	return rt, nil
}

// idleCloser returns what closes the idle connections of a transport:
// reverse_proxy's http transport (default or configured) through its
// *http.Transport, any other transport through CloseIdleConnections when
// it has one.
func idleCloser(t http.RoundTripper) func() {
	switch t := t.(type) {
	case *reverseproxy.HTTPTransport:
		return func() {
			if t.Transport != nil {
				t.Transport.CloseIdleConnections()
			}
		}
	case interface{ CloseIdleConnections() }:
		return t.CloseIdleConnections
	}
	return func() {}
}

// url builds the upstream URL for the client path rest (what followed
// `/v1/`) and raw query.
func (u *upstreamRuntime) url(rest, rawQuery string) string {
	s := u.base + "/" + rest
	if rawQuery != "" {
		s += "?" + rawQuery
	}
	return s
}

// hopHeaders are connection-scoped and never forwarded (RFC 9110 §7.6.1).
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// clientOnlyHeaders carry the client's credentials or state with the relay
// and must never reach a provider.
// X-Region-Hint is the relay's own routing hint.
var clientOnlyHeaders = []string{"Authorization", "X-Api-Key", "Api-Key", "Cookie", "X-Region-Hint"}

// upstreamHeader builds the headers of an upstream request from the
// client's: hop-by-hop, credentials and X-Relay-* headers removed, the
// upstream's key and headers added, identity encoding so streams stay
// parseable.
func (u *upstreamRuntime) upstreamHeader(client http.Header) http.Header {
	h := make(http.Header, len(client)+len(u.headers)+2)
	for k, v := range client {
		if strings.HasPrefix(k, "X-Relay-") {
			continue
		}
		h[k] = v
	}
	for _, v := range client["Connection"] {
		for _, f := range strings.Split(v, ",") {
			h.Del(strings.TrimSpace(f))
		}
	}
	for _, k := range hopHeaders {
		delete(h, k) // both lists are in canonical form
	}
	for _, k := range clientOnlyHeaders {
		delete(h, k)
	}
	delete(h, "Content-Length")
	for k, v := range u.headers {
		h[k] = v
	}
	if u.auth != "" {
		h.Set("Authorization", u.auth)
	}
	h.Set("Accept-Encoding", "identity")
	h.Set("Content-Type", "application/json")
	return h
}
