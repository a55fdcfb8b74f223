package llmrelay

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/anthropic"
	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/dialect/gemini"
	"github.com/llmrelay/caddy-llm-relay/internal/genai"
	"github.com/llmrelay/caddy-llm-relay/internal/thinktag"
)

// upstreamRuntime is an Upstream ready to send requests: URL parsed,
// secrets resolved, transport loaded.
type upstreamRuntime struct {
	name    string
	region  string
	base    string // base URL without trailing slash, e.g. https://api.x.com/v1
	api     string // openai, chat or anthropic
	dialect dialect
	// The credential header: `Authorization: Bearer <key>`, or for
	// Anthropic `x-api-key: <key>`. authValue is "" when no api_key is set.
	authHeader, authValue string
	headers               http.Header
	transport             http.RoundTripper
	// http1 is the same transport held to HTTP/1.1, for a request with
	// `X-HTTP-Version: 1.1` (nil: the transport is not reverse_proxy's
	// http transport, and the header changes nothing).
	http1 http.RoundTripper
	// maxConcurrent is the upstream's max_concurrent (0: none); cap
	// counts its requests in flight, made by the first target that needs
	// it (see attachCaps).
	maxConcurrent int
	cap           *capCounter
	// inline is where the upstream's models write their reasoning (a
	// target may override it); think is its parser's syntax, nil for
	// reasoning in fields.
	inline InlineReasoning
	think  *thinktag.Syntax
	// continueWith is its continue_with ("": the api's default; see
	// continueHow).
	continueWith string
	// probeURI and probeTimeout are its health probe's (health_check's
	// uri and timeout, or their defaults): what GET /v1/ping sends it too.
	probeURI     string
	probeTimeout time.Duration
	// provider is gen_ai.provider.name on its attempts' spans, and
	// serverHost and serverPort their server.address and .port (from the
	// base URL; "" and 0: none); propagate says whether they send their
	// trace context (tracing.go).
	provider   string
	serverHost string
	serverPort int
	propagate  bool

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
	think, err := u.InlineReasoning.syntax()
	if err != nil {
		return nil, err
	}
	rt := &upstreamRuntime{
		think:   think,
		name:    u.Name,
		region:  u.Region,
		base:    strings.TrimSuffix(base.String(), "/"),
		api:     cmp.Or(u.API, apiOpenAI),
		dialect: dialectOfAPI(u.API),
		inline:  u.InlineReasoning,

		continueWith: u.ContinueWith,
		headers:      make(http.Header, len(u.Headers)),
		cleanup:      func() {},

		maxConcurrent: u.MaxConcurrent,
		probeURI:      defaultProbeURI,
		probeTimeout:  defaultProbeTimeout,

		provider:  genai.ProviderName(u.TraceProvider, cmp.Or(u.API, apiOpenAI), u.BaseURL),
		propagate: u.TracePropagation == nil || *u.TracePropagation,
	}
	rt.serverHost, rt.serverPort = genai.Server(rt.base)
	if hc := u.HealthCheck; hc != nil {
		rt.probeURI = cmp.Or(hc.URI, defaultProbeURI)
		rt.probeTimeout = durationOr(hc.Timeout, defaultProbeTimeout)
	}
	if err := checkAPI(u.API); err != nil {
		return nil, err
	}
	rt.authHeader = chat.AuthHeader
	switch rt.dialect {
	case dialectMessages:
		rt.authHeader = anthropic.AuthHeader
	case dialectGemini:
		rt.authHeader = gemini.AuthHeader // the key bare, as the SDKs send it
	}
	if u.APIKey != "" {
		key, err := repl.ReplaceOrErr(u.APIKey, true, true)
		if err != nil {
			return nil, fmt.Errorf("resolving api_key: %w", err)
		}
		rt.authValue = key
		if rt.dialect != dialectMessages && rt.dialect != dialectGemini {
			rt.authValue = chat.AuthScheme + key
		}
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
	raw := u.TransportRaw // LoadModule clears it; the HTTP/1.1 sibling is made from it
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
	rt.transport = reusing{transport}
	rt.closeIdle = idleCloser(transport)
	if ht, ok := transport.(*reverseproxy.HTTPTransport); ok {
		h1, err := http1Sibling(ctx, ht, raw)
		if err != nil {
			return nil, fmt.Errorf("provisioning the HTTP/1.1 transport for X-HTTP-Version: %w", err)
		}
		if h1 != ht {
			rt.http1 = reusing{h1}
			close1, cleanup := idleCloser(h1), rt.cleanup
			closeIdle := rt.closeIdle
			rt.closeIdle = func() { closeIdle(); close1() }
			rt.cleanup = func() { cleanup(); _ = h1.Cleanup() }
		} else {
			rt.http1 = rt.transport
		}
	}
	return rt, nil
}

// httpVersionHeader lets a client ask for HTTP/1.1 to the upstream for its
// request (some networks and debugging proxies want it); it is never
// forwarded.
const httpVersionHeader = "X-Http-Version"

// http1Sibling is reverse_proxy's http transport ht, configured the same
// (from raw, its JSON; nil: the defaults) but held to HTTP/1.1. It is ht
// itself when ht speaks only HTTP/1.1 already.
func http1Sibling(ctx caddy.Context, ht *reverseproxy.HTTPTransport, raw json.RawMessage) (*reverseproxy.HTTPTransport, error) {
	if len(ht.Versions) == 1 && ht.Versions[0] == "1.1" {
		return ht, nil
	}
	h1 := new(reverseproxy.HTTPTransport)
	if raw != nil {
		if err := json.Unmarshal(raw, h1); err != nil {
			return nil, err
		}
	}
	h1.Versions = []string{"1.1"}
	if err := h1.Provision(ctx); err != nil {
		return nil, err
	}
	return h1, nil
}

// transportFor is the transport for a client's request: HTTP/1.1 when it
// asks with X-HTTP-Version: 1.1 (or HTTP/1.1), the upstream's own
// otherwise.
func (u *upstreamRuntime) transportFor(client http.Header) http.RoundTripper {
	if u.http1 != nil {
		if v := client[httpVersionHeader]; len(v) == 1 && (v[0] == "1.1" || v[0] == "HTTP/1.1") {
			return u.http1
		}
	}
	return u.transport
}

// Keeping upstream connections alive. The relay stops reading a stream at
// its [DONE] event and closes the body; the upstream's end of the body (a
// chunked encoding's last chunk) usually comes in a later read, a few
// milliseconds on. Closing an http.Response body before its end makes
// net/http close the connection instead of reusing it, so every stream
// cost a new connection to the upstream: one dial per request where
// reverse_proxy (which reads to the end) opens one connection per
// concurrent stream and keeps it. Under a burst of streams those extra
// dials are what overflows an upstream's listen queue (dial timeouts, then
// the target ejected). reusing reads the rest of a body at Close, within
// bounds, so the connection goes back to the pool.
const (
	drainMax  = 64 << 10               // read at most this much of a body at Close
	drainWait = 100 * time.Millisecond // and wait at most this long for its end
)

// reusing wraps an upstream transport so that closing a response body
// first reads what is left of it (within drainMax and drainWait). Every
// upstream request (attempts, shadow copies, probes) goes through it, so
// closing a body is all any of them does to give its connection back.
type reusing struct{ http.RoundTripper }

func (t reusing) RoundTrip(req *http.Request) (*http.Response, error) {
	// A context of its own, to abort a drain that waits too long.
	ctx, cancel := context.WithCancel(req.Context())
	resp, err := t.RoundTripper.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &drainingBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

type drainingBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *drainingBody) Close() error {
	stop := time.AfterFunc(drainWait, b.cancel)
	_, _ = io.CopyN(io.Discard, b.ReadCloser, drainMax)
	stop.Stop()
	err := b.ReadCloser.Close()
	b.cancel()
	return err
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

// url builds the upstream URL for the endpoint rest (what follows the
// base URL) and raw query.
func (u *upstreamRuntime) url(rest, rawQuery string) string {
	s := u.base + "/" + rest
	if rawQuery != "" {
		s += "?" + rawQuery
	}
	return s
}

// newRequest builds every request the relay sends an upstream (attempts,
// shadow copies, health probes): the URL, the client's headers made safe
// for this upstream (see upstreamHeader), the upstream's credentials in
// its dialect's header, and the body. client may be nil (probes).
func (u *upstreamRuntime) newRequest(ctx context.Context, method, url string, client http.Header, body payload) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return nil, fmt.Errorf("building the request to upstream %s: %w", u.name, err)
	}
	req.Header = u.upstreamHeader(client)
	if body.parts == nil {
		req.Header.Del("Content-Type")
		return req, nil
	}
	body.attach(req)
	return req, nil
}

// hopHeaders are connection-scoped and never forwarded (RFC 9110 §7.6.1).
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// clientOnlyHeaders carry the client's credentials or state with the relay
// and must never reach a provider.
// X-Region-Hint and X-HTTP-Version are the relay's own request knobs.
var clientOnlyHeaders = []string{"Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key", "Cookie", "X-Region-Hint", httpVersionHeader}

// upstreamHeader builds the headers of an upstream request from the
// client's: hop-by-hop, credentials and X-Relay-* headers removed (and
// Anthropic-* ones, unless the upstream speaks Anthropic), the upstream's
// key and headers added, identity encoding so streams stay parseable.
// An Anthropic upstream gets `anthropic-version`: the upstream's own
// `header`, else the client's, else anthropic.Version.
func (u *upstreamRuntime) upstreamHeader(client http.Header) http.Header {
	h := make(http.Header, len(client)+len(u.headers)+3)
	for k, v := range client {
		if strings.HasPrefix(k, "X-Relay-") || u.dialect != dialectMessages && strings.HasPrefix(k, anthropic.HeaderPrefix) {
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
	if u.authValue != "" {
		h.Set(u.authHeader, u.authValue)
	}
	if u.dialect == dialectMessages && h.Get(anthropic.VersionHeader) == "" {
		h.Set(anthropic.VersionHeader, anthropic.Version)
	}
	h.Set("Accept-Encoding", "identity")
	h.Set("Content-Type", "application/json")
	return h
}
