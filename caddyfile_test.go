package llmrelay

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
)

// cfFull uses every llm_relay option. Line numbers matter to the tests
// below: line 1 is `llm_relay {`.
const cfFull = `llm_relay {
	key {env.RELAY_KEY} team-a
	key sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
	max_body 1MiB

	upstream openai https://api.openai.com/v1 {
		api_key {env.OPENAI_API_KEY}
		header OpenAI-Organization org-123
		header x-trace-source relay
		header X-Trace-Source caddy
		transport http {
			dial_timeout 2s
			response_header_timeout 30s
		}
	}
	upstream deepseek https://api.deepseek.com/v1 {
		api_key {env.DEEPSEEK_API_KEY}
	}

	model smart {
		to openai o3-mini {
			set reasoning_effort low
			set reasoning.max_tokens 2000
			set temperature 0.2
			unset top_p
		}
		to deepseek deepseek-reasoner
	}
	model * {
		to openai
	}

	failover {
		on connect timeout 429 5xx 408
		attempts 4
		backoff 50ms 1s
		first_byte_timeout 5s
		try_duration 20s
	}
}`

// cfParse runs the Caddyfile parser on in, as the llm_relay directive would.
func cfParse(t *testing.T, in string) (*Relay, error) {
	t.Helper()
	r := new(Relay)
	err := r.UnmarshalCaddyfile(caddyfile.NewTestDispenser(in))
	return r, err
}

// cfProvision provisions and validates r as Caddy would, and always runs
// Cleanup afterwards (Caddy also cleans up a module whose Provision failed).
func cfProvision(t *testing.T, r *Relay) error {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	t.Cleanup(func() {
		if err := r.Cleanup(); err != nil {
			t.Errorf("Cleanup: %v", err)
		}
	})
	if err := r.Provision(ctx); err != nil {
		return err
	}
	return r.Validate()
}

func cfJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCaddyfileParseFull(t *testing.T) {
	r, err := cfParse(t, cfFull)
	if err != nil {
		t.Fatal(err)
	}

	wantKeys := []ClientKey{
		{Token: "{env.RELAY_KEY}", Name: "team-a"},
		{Token: "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"},
	}
	if !reflect.DeepEqual(r.Keys, wantKeys) {
		t.Errorf("Keys = %+v, want %+v", r.Keys, wantKeys)
	}
	if r.MaxBody != 1<<20 {
		t.Errorf("MaxBody = %d, want %d (1MiB)", r.MaxBody, 1<<20)
	}

	// Upstreams, in config order.
	if len(r.Upstreams) != 2 {
		t.Fatalf("got %d upstreams, want 2", len(r.Upstreams))
	}
	oa, ds := r.Upstreams[0], r.Upstreams[1]
	if oa.Name != "openai" || oa.BaseURL != "https://api.openai.com/v1" || oa.APIKey != "{env.OPENAI_API_KEY}" {
		t.Errorf("upstream 0 = %q %q api_key %q", oa.Name, oa.BaseURL, oa.APIKey)
	}
	// Field names are canonicalized, so differently-cased lines add up.
	wantHeaders := map[string][]string{
		"Openai-Organization": {"org-123"},
		"X-Trace-Source":      {"relay", "caddy"},
	}
	if !reflect.DeepEqual(oa.Headers, wantHeaders) {
		t.Errorf("upstream openai Headers = %v, want %v", oa.Headers, wantHeaders)
	}
	var transport map[string]any
	if err := json.Unmarshal(oa.TransportRaw, &transport); err != nil {
		t.Fatalf("TransportRaw %s: %v", oa.TransportRaw, err)
	}
	wantTransport := map[string]any{
		"protocol":                "http",
		"dial_timeout":            float64(2 * time.Second),
		"response_header_timeout": float64(30 * time.Second),
	}
	if !reflect.DeepEqual(transport, wantTransport) {
		t.Errorf("upstream openai transport = %s, want %v", oa.TransportRaw, wantTransport)
	}
	if ds.Name != "deepseek" || ds.BaseURL != "https://api.deepseek.com/v1" || ds.APIKey != "{env.DEEPSEEK_API_KEY}" {
		t.Errorf("upstream 1 = %q %q api_key %q", ds.Name, ds.BaseURL, ds.APIKey)
	}
	if ds.Headers != nil || ds.TransportRaw != nil {
		t.Errorf("upstream deepseek: want no headers and the default transport, got %v %s", ds.Headers, ds.TransportRaw)
	}

	// Models, in config order, with their chains in failover order.
	if len(r.Models) != 2 {
		t.Fatalf("got %d models, want 2", len(r.Models))
	}
	smart, wild := r.Models[0], r.Models[1]
	if smart.Alias != "smart" || len(smart.Targets) != 2 {
		t.Fatalf("model 0 = %q with %d targets, want smart with 2", smart.Alias, len(smart.Targets))
	}
	t0, t1 := smart.Targets[0], smart.Targets[1]
	if t0.Upstream != "openai" || t0.Model != "o3-mini" {
		t.Errorf("smart target 0 = %q %q, want openai o3-mini", t0.Upstream, t0.Model)
	}
	// `set` values are JSON when they parse as JSON, else JSON strings.
	wantSet := map[string]string{
		"reasoning_effort":     `"low"`,
		"reasoning.max_tokens": `2000`,
		"temperature":          `0.2`,
	}
	gotSet := map[string]string{}
	for k, v := range t0.Set {
		gotSet[k] = string(v)
	}
	if !reflect.DeepEqual(gotSet, wantSet) {
		t.Errorf("smart target 0 Set = %v, want %v", gotSet, wantSet)
	}
	if !reflect.DeepEqual(t0.Unset, []string{"top_p"}) {
		t.Errorf("smart target 0 Unset = %q, want [top_p]", t0.Unset)
	}
	if t1.Upstream != "deepseek" || t1.Model != "deepseek-reasoner" || t1.Set != nil || t1.Unset != nil {
		t.Errorf("smart target 1 = %+v, want deepseek deepseek-reasoner with no edits", t1)
	}
	if wild.Alias != "*" || !reflect.DeepEqual(wild.Targets, []Target{{Upstream: "openai"}}) {
		t.Errorf("model 1 = %q %+v, want * -> openai with the client's model", wild.Alias, wild.Targets)
	}

	want := &Failover{
		On:               []string{"connect", "timeout", "429", "5xx", "408"},
		Attempts:         4,
		BackoffBase:      caddy.Duration(50 * time.Millisecond),
		BackoffMax:       caddy.Duration(time.Second),
		FirstByteTimeout: caddy.Duration(5 * time.Second),
		TryDuration:      caddy.Duration(20 * time.Second),
	}
	if !reflect.DeepEqual(r.Failover, want) {
		t.Errorf("Failover = %+v, want %+v", r.Failover, want)
	}
}

func TestCaddyfileParseMinimalLeavesDefaults(t *testing.T) {
	r, err := cfParse(t, `llm_relay {
		upstream local http://127.0.0.1:9000/v1
		model m {
			to local
		}
	}`)
	if err != nil {
		t.Fatal(err)
	}
	// Unset options stay zero, so the JSON is minimal and Provision applies
	// the defaults.
	if r.Keys != nil || r.MaxBody != 0 || r.Failover != nil {
		t.Errorf("want no keys, max_body or failover, got %+v %d %+v", r.Keys, r.MaxBody, r.Failover)
	}
	got := cfJSON(t, r)
	want := `{"upstreams":[{"name":"local","base_url":"http://127.0.0.1:9000/v1"}],"models":[{"alias":"m","targets":[{"upstream":"local"}]}]}`
	if got != want {
		t.Errorf("JSON\n got %s\nwant %s", got, want)
	}

	// No block at all parses too (Validate rejects it later).
	if _, err := cfParse(t, "llm_relay"); err != nil {
		t.Errorf("bare llm_relay: %v", err)
	}
}

func TestCaddyfileParseSetValues(t *testing.T) {
	for _, tc := range []struct{ value, want string }{
		{`low`, `"low"`},
		{`0.2`, `0.2`},
		{`2000`, `2000`},
		{`true`, `true`},
		{`null`, `null`},
		{`"end here"`, `"end here"`}, // Caddyfile quotes: one token with a space
		{"`\"42\"`", `"42"`},         // backquotes keep the JSON quotes: the string "42"
		{"`[\"a\",\"b\"]`", `["a","b"]`},
		{"`{\"type\":\"json_object\"}`", `{"type":"json_object"}`},
		{`01`, `"01"`}, // not valid JSON, so a string
		{`1.`, `"1."`},
	} {
		in := "llm_relay {\n\tupstream u http://x/v1\n\tmodel m {\n\t\tto u {\n\t\t\tset f " + tc.value + "\n\t\t}\n\t}\n}"
		r, err := cfParse(t, in)
		if err != nil {
			t.Errorf("set f %s: %v", tc.value, err)
			continue
		}
		if got := string(r.Models[0].Targets[0].Set["f"]); got != tc.want {
			t.Errorf("set f %s: got JSON %s, want %s", tc.value, got, tc.want)
		}
	}
}

func TestCaddyfileParseToMayNameALaterUpstream(t *testing.T) {
	r, err := cfParse(t, `llm_relay {
		model m {
			to b
			to a model-a
		}
		upstream a http://a/v1
		upstream b http://b/v1
	}`)
	if err != nil {
		t.Fatal(err)
	}
	want := []Target{{Upstream: "b"}, {Upstream: "a", Model: "model-a"}}
	if !reflect.DeepEqual(r.Models[0].Targets, want) {
		t.Errorf("targets = %+v, want %+v", r.Models[0].Targets, want)
	}
}

func TestCaddyfileParseErrors(t *testing.T) {
	// ok wraps a body into a valid llm_relay block that starts at line 1 with
	// an upstream u (line 2) and a model m (lines 3-5), so the body's first
	// line is Testfile:6.
	ok := func(body string) string {
		return "llm_relay {\n\tupstream u http://u/v1\n\tmodel m {\n\t\tto u\n\t}\n" + body + "\n}"
	}
	for _, tc := range []struct {
		name string
		in   string
		want []string // each must appear in the error
		note string   // a regression this case guards against, if any
	}{
		{"matcher-like argument", "llm_relay upstream", []string{"takes no arguments besides a matcher; put settings in its block", "Testfile:1"}, ""},
		{"unknown subdirective", ok("\tretries 3"), []string{`unrecognized llm_relay subdirective "retries"; expected key, max_body, upstream, model, failover, smoothing, slo, reasoning_budget, reasoning_field, adaptive_effort, price, builtin_prices, region, state, capacity, resume or trace_content`, "Testfile:6"}, ""},

		// key
		{"key without token", ok("\tkey"), []string{"key: expected `key <token> [<name>]`, got 0 arguments", "Testfile:6"}, ""},
		{"key with 3 args", ok("\tkey tok team a"), []string{"key: expected `key <token> [<name>]`, got 3 arguments", "Testfile:6"}, ""},

		// max_body
		{"max_body without size", ok("\tmax_body"), []string{"wrong argument count", "Testfile:6"}, ""},
		{"max_body not a size", ok("\tmax_body lots"), []string{`max_body: "lots" is not a size; write it like 16MiB or 512KB`, "Testfile:6"}, ""},
		{"max_body zero", ok("\tmax_body 0"), []string{`max_body: "0" is not a size`, "Testfile:6"}, ""},
		{"max_body negative", ok("\tmax_body -1MB"), []string{`max_body: "-1MB" is not a size`, "Testfile:6"}, ""},
		{"max_body two args", ok("\tmax_body 1 MiB"), []string{"wrong argument count", "Testfile:6"}, ""},

		// upstream
		{"upstream without base_url", ok("\tupstream v"), []string{"upstream: expected `upstream <name> <base_url>`, e.g. `upstream openai https://api.openai.com/v1`", "Testfile:6"}, ""},
		{"upstream without base_url, with block", ok("\tupstream v {\n\t\tapi_key k\n\t}"), []string{"upstream: expected `upstream <name> <base_url>`", "Testfile:6"}, ""},
		{"upstream with 3 args", ok("\tupstream v http://v/v1 extra"), []string{"upstream: expected `upstream <name> <base_url>`", "Testfile:6"}, ""},
		{"duplicate upstream", ok("\tupstream u http://other/v1"), []string{`upstream "u" is defined twice; give each upstream a unique name`, "Testfile:6"}, ""},
		{"duplicate upstream with a block", ok("\tupstream u http://other/v1 {\n\t\tapi_key k\n\t}"), []string{`upstream "u" is defined twice`, "Testfile:6"},
			"regression: caddyfile.go: the duplicate check runs after parseUpstream consumed the block, so the error names the closing `}` (Testfile:8), not the `upstream` line (Testfile:6)"},
		{"trace_propagation value", ok("\tupstream v http://v/v1 {\n\t\ttrace_propagation maybe\n\t}"), []string{`upstream "v": expected one ` + "`trace_propagation on|off`", "Testfile:7"}, ""},
		{"trace_provider without a name", ok("\tupstream v http://v/v1 {\n\t\ttrace_provider\n\t}"), []string{"expected one `trace_provider <name>`", "Testfile:7"}, ""},
		{"trace_content value", ok("\ttrace_content yes"), []string{"trace_content: expected `trace_content on|off`", "Testfile:6"}, ""},
		{"unknown upstream subdirective", ok("\tupstream v http://v/v1 {\n\t\tapikey k\n\t}"), []string{`unrecognized upstream subdirective "apikey"; expected api, api_key, header, transport, region, health_check, max_concurrent, reasoning_format, reasoning_tags, starts_in_reasoning, reasoning_end_marker, continue_with, trace_provider or trace_propagation`, "Testfile:7"}, ""},
		{"api_key without value", ok("\tupstream v http://v/v1 {\n\t\tapi_key\n\t}"), []string{"wrong argument count", "Testfile:7"}, ""},
		{"api_key twice", ok("\tupstream v http://v/v1 {\n\t\tapi_key a\n\t\tapi_key b\n\t}"), []string{`upstream "v": api_key is already specified`, "Testfile:8"}, ""},
		{"api_key with 2 args", ok("\tupstream v http://v/v1 {\n\t\tapi_key a b\n\t}"), []string{"wrong argument count", "Testfile:7"}, ""},
		{"api_key empty", ok("\tupstream v http://v/v1 {\n\t\tapi_key \"\"\n\t}"), []string{"api_key", "empty", "Testfile:7"},
			"regression: caddyfile.go parseUpstream: `api_key \"\"` (e.g. from `api_key \"{$UNSET}\"`) is accepted and the upstream silently gets no Authorization, though the docs say an empty value fails the load"},
		{"header with one arg", ok("\tupstream v http://v/v1 {\n\t\theader X-A\n\t}"), []string{"upstream \"v\": expected `header <field> <value>`", "Testfile:7"}, ""},
		{"header with 3 args", ok("\tupstream v http://v/v1 {\n\t\theader X-A b c\n\t}"), []string{"wrong argument count", "Testfile:7"}, ""},
		{"transport without name", ok("\tupstream v http://v/v1 {\n\t\ttransport\n\t}"), []string{"wrong argument count", "Testfile:7"}, ""},
		{"transport twice", ok("\tupstream v http://v/v1 {\n\t\ttransport http\n\t\ttransport http\n\t}"), []string{`upstream "v": transport is already specified`, "Testfile:8"}, ""},
		{"unknown transport", ok("\tupstream v http://v/v1 {\n\t\ttransport carrier_pigeon\n\t}"), []string{"carrier_pigeon", "Testfile:7"}, ""},
		{"bad transport option", ok("\tupstream v http://v/v1 {\n\t\ttransport http {\n\t\t\tdial_timeout soon\n\t\t}\n\t}"), []string{"soon", "Testfile:8"}, ""},

		// model
		{"model without alias", ok("\tmodel {\n\t\tto u\n\t}"), []string{"model: expected `model <alias> { to <upstream> [<upstream_model>] }`", "Testfile:6"}, ""},
		{"model with 2 args", ok("\tmodel a u"), []string{"wrong argument count", "Testfile:6"}, ""},
		{"model without block", ok("\tmodel n"), []string{"model \"n\" has no targets; add `to <upstream> [<upstream_model>]` in its block", "Testfile:6"}, ""},
		{"model with empty block", ok("\tmodel n {\n\t\t# to u\n\t}"), []string{"model \"n\" has no targets", "Testfile:6"},
			"regression: caddyfile.go parseModel: the no-targets error is raised after the block was consumed, so it names the closing `}` (Testfile:8), not the `model` line (Testfile:6)"},
		{"duplicate model", ok("\tmodel m {\n\t\tto u\n\t}"), []string{`model "m" is defined twice; list all its targets in one block`, "Testfile:6"},
			"regression: caddyfile.go: the duplicate-model check runs after parseModel consumed the block, so the error names the closing `}` (Testfile:8), not the `model` line (Testfile:6)"},
		{"unknown model subdirective", ok("\tmodel n {\n\t\ttarget u\n\t}"), []string{`unrecognized model subdirective "target"; expected to`, "Testfile:7"}, ""},
		{"to without upstream", ok("\tmodel n {\n\t\tto\n\t}"), []string{"model \"n\": expected `to <upstream> [<upstream_model>]`", "Testfile:7"}, ""},
		{"to with 3 args", ok("\tmodel n {\n\t\tto u a b\n\t}"), []string{"model \"n\": expected `to <upstream> [<upstream_model>]`", "Testfile:7"}, ""},
		{"unknown upstream in to", ok("\tmodel n {\n\t\tto u\n\t\tto nope other-model\n\t}\n\tupstream w http://w/v1"), []string{"model \"n\": unknown upstream \"nope\"; define it with `upstream nope <base_url>`", "Testfile:8"}, ""},
		{"set with one arg", ok("\tmodel n {\n\t\tto u {\n\t\t\tset temperature\n\t\t}\n\t}"), []string{"set: expected `set <json_field> <value>`", "Testfile:8"}, ""},
		{"set with 3 args", ok("\tmodel n {\n\t\tto u {\n\t\t\tset stop end here\n\t\t}\n\t}"), []string{"set stop: too many arguments; quote a value with spaces", "Testfile:8"}, ""},
		{"unset without field", ok("\tmodel n {\n\t\tto u {\n\t\t\tunset\n\t\t}\n\t}"), []string{"unset: expected `unset <json_field>`", "Testfile:8"}, ""},
		{"unset with 2 args", ok("\tmodel n {\n\t\tto u {\n\t\t\tunset a b\n\t\t}\n\t}"), []string{"wrong argument count", "Testfile:8"}, ""},
		{"unknown target subdirective", ok("\tmodel n {\n\t\tto u {\n\t\t\tdelete top_p\n\t\t}\n\t}"), []string{`unrecognized target subdirective "delete"; expected set, unset, rank, weight, max_concurrent, reasoning_format, reasoning_tags, starts_in_reasoning or reasoning_end_marker`, "Testfile:8"}, ""},

		// failover
		{"failover twice", ok("\tfailover {\n\t\tattempts 2\n\t}\n\tfailover {\n\t}"), []string{"failover is already specified; use one failover block", "Testfile:9"}, ""},
		{"failover with args", ok("\tfailover 3"), []string{"wrong argument count", "Testfile:6"}, ""},
		{"unknown failover subdirective", ok("\tfailover {\n\t\tretries 3\n\t}"), []string{`unrecognized failover subdirective "retries"; expected on, attempts, backoff, first_byte_timeout, try_duration, stream_idle_timeout, after_commit or continue_reasoning`, "Testfile:7"}, ""},
		{"on without classes", ok("\tfailover {\n\t\ton\n\t}"), []string{"on: expected one or more of connect, timeout, 5xx, 429", "Testfile:7"}, ""},
		{"on with a bad word", ok("\tfailover {\n\t\ton connect ratelimit\n\t}"), []string{`on: unknown failover trigger "ratelimit": use connect, timeout, a status class like 5xx, or a status code like 429`, "Testfile:7"}, ""},
		{"on with 6xx", ok("\tfailover {\n\t\ton 6xx\n\t}"), []string{`unknown failover trigger "6xx"`, "Testfile:7"}, ""},
		{"on with status 600", ok("\tfailover {\n\t\ton 600\n\t}"), []string{`unknown failover trigger "600"`, "Testfile:7"}, ""},
		{"attempts zero", ok("\tfailover {\n\t\tattempts 0\n\t}"), []string{`attempts: "0" is not a positive whole number`, "Testfile:7"}, ""},
		{"attempts not a number", ok("\tfailover {\n\t\tattempts many\n\t}"), []string{`attempts: "many" is not a positive whole number`, "Testfile:7"}, ""},
		{"attempts without value", ok("\tfailover {\n\t\tattempts\n\t}"), []string{"wrong argument count", "Testfile:7"}, ""},
		{"backoff with one arg", ok("\tfailover {\n\t\tbackoff 1s\n\t}"), []string{"backoff: expected `backoff <base> <max>`, e.g. `backoff 100ms 2s`", "Testfile:7"}, ""},
		{"backoff with 3 args", ok("\tfailover {\n\t\tbackoff 1s 2s 3s\n\t}"), []string{"backoff: expected `backoff <base> <max>`", "Testfile:7"}, ""},
		{"backoff bad base", ok("\tfailover {\n\t\tbackoff 100 2s\n\t}"), []string{`backoff base: "100" is not a positive duration; write it like 250ms, 2s or 1m`, "Testfile:7"}, ""},
		{"backoff bad max", ok("\tfailover {\n\t\tbackoff 100ms 0s\n\t}"), []string{`backoff max: "0s" is not a positive duration`, "Testfile:7"}, ""},
		{"backoff max below base", ok("\tfailover {\n\t\tbackoff 2s 100ms\n\t}"), []string{"backoff: max 100ms is below base 2s", "Testfile:7"}, ""},
		{"first_byte_timeout without unit", ok("\tfailover {\n\t\tfirst_byte_timeout 5\n\t}"), []string{`first_byte_timeout: "5" is not a positive duration; write it like 250ms, 2s or 1m`, "Testfile:7"}, ""},
		{"first_byte_timeout without value", ok("\tfailover {\n\t\tfirst_byte_timeout\n\t}"), []string{"wrong argument count", "Testfile:7"}, ""},
		{"first_byte_timeout with 2 args", ok("\tfailover {\n\t\tfirst_byte_timeout 5s 6s\n\t}"), []string{"wrong argument count", "Testfile:7"}, ""},
		{"try_duration negative", ok("\tfailover {\n\t\ttry_duration -1s\n\t}"), []string{`try_duration: "-1s" is not a positive duration`, "Testfile:7"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cfParse(t, tc.in)
			if err == nil {
				t.Fatalf("no error for:\n%s", tc.in)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q\ninput:\n%s", err, w, tc.in)
				}
			}
		})
	}
}

func TestProvisionFromCaddyfile(t *testing.T) {
	t.Run("full config", func(t *testing.T) {
		t.Setenv("RELAY_KEY", "client-secret")
		t.Setenv("OPENAI_API_KEY", "sk-openai")
		t.Setenv("DEEPSEEK_API_KEY", "sk-deepseek")
		r, err := cfParse(t, cfFull)
		if err != nil {
			t.Fatal(err)
		}
		if err := cfProvision(t, r); err != nil {
			t.Fatalf("provision: %v", err)
		}
		if len(r.keys) != 2 {
			t.Errorf("got %d client keys, want 2", len(r.keys))
		}
		req := &http.Request{Header: http.Header{"Authorization": {"Bearer client-secret"}}}
		if e, ok := r.keys.authenticate(req); !ok || e.name != "team-a" {
			t.Errorf("the {env.RELAY_KEY} key: authenticate = %v %v, want team-a true", e, ok)
		}
		req = &http.Request{Header: http.Header{"X-Api-Key": {"test"}}} // sha256("test")
		if e, ok := r.keys.authenticate(req); !ok || e.name != "key-2" {
			t.Errorf("the sha256: key: authenticate = %v %v, want key-2 true", e, ok)
		}
		oa := r.upstreams["openai"]
		if oa == nil {
			t.Fatal("upstream openai not provisioned")
		}
		if oa.authValue != "Bearer sk-openai" {
			t.Errorf("openai auth = %q, want the resolved env key", oa.authValue)
		}
		if got := oa.headers.Values("X-Trace-Source"); !reflect.DeepEqual(got, []string{"relay", "caddy"}) {
			t.Errorf("openai X-Trace-Source = %q", got)
		}
		if ds := r.upstreams["deepseek"]; ds == nil || ds.authValue != "Bearer sk-deepseek" {
			t.Errorf("upstream deepseek = %+v", ds)
		}
		if r.routes["smart"] == nil || len(r.routes["smart"].targets) != 2 || r.wildcard == nil {
			t.Errorf("routes not compiled: %v wildcard %v", r.routes, r.wildcard)
		}
		if r.MaxBody != 1<<20 || r.attempts != 4 || r.firstByte != 5*time.Second || r.tryDur != 20*time.Second ||
			r.backoff.base != 50*time.Millisecond || r.backoff.max != time.Second {
			t.Errorf("limits: max_body %d attempts %d first_byte %s try %s backoff %s..%s",
				r.MaxBody, r.attempts, r.firstByte, r.tryDur, r.backoff.base, r.backoff.max)
		}
	})

	t.Run("minimal config gets the defaults", func(t *testing.T) {
		r, err := cfParse(t, "llm_relay {\n\tupstream local http://127.0.0.1:9000/v1\n\tmodel m {\n\t\tto local\n\t}\n}")
		if err != nil {
			t.Fatal(err)
		}
		if err := cfProvision(t, r); err != nil {
			t.Fatalf("provision: %v", err)
		}
		if r.MaxBody != defaultMaxBody || r.firstByte != defaultFirstByteTimeout || r.tryDur != defaultTryDuration ||
			r.backoff.base != defaultBackoffBase || r.backoff.max != defaultBackoffMax || r.attempts != 0 {
			t.Errorf("defaults: max_body %d first_byte %s try %s backoff %s..%s attempts %d",
				r.MaxBody, r.firstByte, r.tryDur, r.backoff.base, r.backoff.max, r.attempts)
		}
		if !r.keys.open() {
			t.Error("no keys configured, but the relay is not open")
		}
		if r.upstreams["local"].authValue != "" {
			t.Errorf("no api_key configured, but auth = %q", r.upstreams["local"].authValue)
		}
	})

	for _, tc := range []struct {
		name string
		in   string
		want []string
		note string // a regression this case guards against, if any
	}{
		{
			name: "api_key from an unset env var",
			in:   "llm_relay {\n\tupstream openai https://api.openai.com/v1 {\n\t\tapi_key {env.UNSET_VAR_XYZ}\n\t}\n\tmodel m {\n\t\tto openai\n\t}\n}",
			want: []string{`upstream "openai"`, "api_key", "{env.UNSET_VAR_XYZ} is empty"},
		},
		{
			name: "header from an unset env var",
			in:   "llm_relay {\n\tupstream openai https://api.openai.com/v1 {\n\t\theader X-Org {env.UNSET_VAR_XYZ}\n\t}\n\tmodel m {\n\t\tto openai\n\t}\n}",
			want: []string{`upstream "openai"`, "header X-Org", "{env.UNSET_VAR_XYZ} is empty"},
		},
		{
			name: "key from an unset env var",
			in:   "llm_relay {\n\tkey {env.UNSET_VAR_XYZ} team-a\n\tupstream u http://u/v1\n\tmodel m {\n\t\tto u\n\t}\n}",
			want: []string{`key "team-a"`, "{env.UNSET_VAR_XYZ} is empty"},
		},
		{
			name: "base_url without scheme",
			in:   "llm_relay {\n\tupstream openai api.openai.com/v1\n\tmodel m {\n\t\tto openai\n\t}\n}",
			want: []string{`upstream "openai"`, `base_url "api.openai.com/v1" must be an absolute http(s) URL such as https://api.openai.com/v1`},
		},
		{
			name: "base_url with another scheme",
			in:   "llm_relay {\n\tupstream openai ftp://api.openai.com/v1\n\tmodel m {\n\t\tto openai\n\t}\n}",
			want: []string{`upstream "openai"`, "must be an absolute http(s) URL"},
		},
		{
			name: "sha256 key too short",
			in:   "llm_relay {\n\tkey sha256:9f86d081884c7d659a2feaa0c55ad015 ops\n\tupstream u http://u/v1\n\tmodel m {\n\t\tto u\n\t}\n}",
			want: []string{`key "ops"`, "sha256: needs 64 hex digits", "sha256sum"},
		},
		{
			name: "sha256 key not hex",
			in:   "llm_relay {\n\tkey sha256:zz86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\n\tupstream u http://u/v1\n\tmodel m {\n\t\tto u\n\t}\n}",
			want: []string{`key "key-1"`, "sha256: needs 64 hex digits"},
		},
		{
			name: "two keys with the same token",
			in:   "llm_relay {\n\tkey test a\n\tkey sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 b\n\tupstream u http://u/v1\n\tmodel m {\n\t\tto u\n\t}\n}",
			want: []string{`key "b": same token as key "a"`},
		},
		{
			name: "no upstream",
			in:   "llm_relay",
			want: []string{"at least one upstream is required"},
		},
		{
			name: "no model",
			in:   "llm_relay {\n\tupstream u http://u/v1\n}",
			want: []string{"at least one model route is required"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := cfParse(t, tc.in)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			err = cfProvision(t, r)
			if err == nil {
				t.Fatalf("provision and validate succeeded for:\n%s", tc.in)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

// A JSON config bypasses the Caddyfile parser, so Provision checks set/unset
// paths itself.
func TestProvisionRejectsBadEditsFromJSON(t *testing.T) {
	for field, want := range map[string]string{
		"model": "the model is set by the `to` line",
		"a..b":  "empty name in field path",
	} {
		r := &Relay{
			Upstreams: []*Upstream{{Name: "u", BaseURL: "http://127.0.0.1:1/v1"}},
			Models: []*ModelRoute{{Alias: "m", Targets: []Target{{
				Upstream: "u", Set: map[string]json.RawMessage{field: json.RawMessage(`"x"`)},
			}}}},
		}
		ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
		err := r.Provision(ctx)
		_ = r.Cleanup()
		cancel()
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `model "m": target 1`) {
			t.Errorf("set %s: err %v, want one containing %q", field, err, want)
		}
	}
}

func TestCaddyfileHealthRouting(t *testing.T) {
	r, err := cfParse(t, `llm_relay {
	upstream eu http://eu/v1 {
		region eu
		health_check {
			uri /health
			interval 10s
			timeout 2s
		}
	}
	upstream us http://us/v1 {
		region us
	}
	upstream next http://next/v1
	slo {
		ttft 800ms
		success 95%
		window 40
		min_samples 8
	}
	model m {
		to eu
		to us {
			rank 1
			weight 3
		}
		slo {
			ttft 2s
			reasoning_floor 0.5
			cluster_rate 80%
		}
		canary next next-model 5 {
			key header X-User
			guard {
				ttft_p99 3s
				error_rate 0.1
				min_samples 10
				window 50
			}
			promote 25 100 every 10m
		}
		shadow next 10% {
			max_concurrent 3
			warn_similarity 0.4
		}
	}
}`)
	if err != nil {
		t.Fatal(err)
	}
	hc := r.Upstreams[0].HealthCheck
	if r.Upstreams[0].Region != "eu" || hc == nil || hc.URI != "/health" || hc.Interval != caddy.Duration(10*time.Second) || hc.Timeout != caddy.Duration(2*time.Second) {
		t.Errorf("upstream eu: %+v %+v", r.Upstreams[0], hc)
	}
	if s := r.SLO; s == nil || s.TTFT != caddy.Duration(800*time.Millisecond) || s.Success != 0.95 || s.Window != 40 || s.MinSamples != 8 {
		t.Errorf("relay slo %+v", r.SLO)
	}
	m := r.Models[0]
	if s := m.SLO; s == nil || s.ReasoningFloor != 0.5 || s.ClusterRate != 0.8 {
		t.Errorf("model slo %+v", m.SLO)
	}
	if m.Targets[1].Rank != 1 || m.Targets[1].Weight != 3 {
		t.Errorf("target us %+v", m.Targets[1])
	}
	c := m.Canary
	if c == nil || c.Upstream != "next" || c.Model != "next-model" || c.Percent != 5 || c.Key != "header:X-User" ||
		c.Guard.TTFTP99 != caddy.Duration(3*time.Second) || c.Guard.ErrorRate != 0.1 || c.Guard.MinSamples != 10 || c.Guard.Window != 50 ||
		len(c.Promote) != 2 || c.Promote[1] != 100 || c.PromoteEvery != caddy.Duration(10*time.Minute) {
		t.Errorf("canary %+v", c)
	}
	if s := m.Shadow; s == nil || s.Upstream != "next" || s.Model != "" || s.Percent != 10 || s.MaxConcurrent != 3 || s.WarnSimilarity != 0.4 {
		t.Errorf("shadow %+v", m.Shadow)
	}
	if err := cfProvision(t, r); err != nil {
		t.Fatal(err)
	}
	rt := r.routes["m"]
	// The model's slo overrides ttft only; the rest comes from the relay.
	if slo := rt.targets[0].slo; slo.TTFT != 2*time.Second || slo.Success != 0.95 || slo.Window != 40 || slo.MinSamples != 8 {
		t.Errorf("resolved slo %+v", slo)
	}
	if c := rt.shadow.target.rslo; rt.targets[1].rslo != c || c.Floor != 0.5 || c.ClusterRate != 0.8 {
		t.Errorf("resolved reasoning slo %+v, shadow %+v", rt.targets[1].rslo, c)
	}
	if rt.targets[0].rank != 1 || rt.targets[1].rank != 1 || rt.targets[1].weight != 3 {
		t.Errorf("ranks: eu %d, us %d/%d (equal ranks form a pool)", rt.targets[0].rank, rt.targets[1].rank, rt.targets[1].weight)
	}
	if rt.canary == nil || rt.canary.c.Share() != 5 || rt.shadow == nil || rt.shadow.percent != 10 {
		t.Errorf("canary/shadow not compiled: %+v %+v", rt.canary, rt.shadow)
	}
}

func TestCaddyfileHealthErrors(t *testing.T) {
	ok := func(body string) string {
		return "llm_relay {\n\tupstream u http://u/v1\n\tmodel m {\n\t\tto u\n\t}\n" + body + "\n}"
	}
	model := func(body string) string {
		return "llm_relay {\n\tupstream u http://u/v1\n\tmodel m {\n\t\tto u\n" + body + "\n\t}\n}"
	}
	for _, tc := range []struct {
		name string
		in   string
		want []string
	}{
		{"slo bad ratio", ok("\tslo {\n\t\tsuccess 1.5\n\t}"), []string{`slo success: "1.5" is not a ratio; write it like 0.95 or 95%`, "Testfile:7"}},
		{"slo bad window", ok("\tslo {\n\t\twindow 0\n\t}"), []string{`slo window: "0" is not a positive whole number`, "Testfile:7"}},
		{"slo unknown", ok("\tslo {\n\t\tp99 1s\n\t}"), []string{`unrecognized slo subdirective "p99"`, "Testfile:7"}},
		{"slo reasoning_floor", ok("\tslo {\n\t\treasoning_floor 0\n\t}"), []string{`slo reasoning_floor: "0" is not a ratio; write it like 0.95 or 95%`, "Testfile:7"}},
		{"slo cluster_rate", model("\t\tslo {\n\t\t\tcluster_rate 1.2\n\t\t}"), []string{`slo cluster_rate: "1.2" is not a ratio; write it like 0.95 or 95%`, "Testfile:6"}},
		{"slo twice", ok("\tslo {\n\t}\n\tslo {\n\t}"), []string{"slo is already specified", "Testfile:8"}},
		{"health_check relative", ok("\tupstream v http://v/v1 {\n\t\thealth_check {\n\t\t\turi models\n\t\t}\n\t}"),
			[]string{`health_check uri "models": write a path relative to the base URL, such as /models`, "Testfile:8"}},
		{"region missing", ok("\tupstream v http://v/v1 {\n\t\tregion\n\t}"), []string{"expected `region <code>`", "Testfile:7"}},
		{"rank zero", model("\t\tto u {\n\t\t\trank 0\n\t\t}"), []string{`rank: "0" is not a positive whole number`, "Testfile:6"}},
		{"canary percent", model("\t\tcanary u 150"), []string{`canary: "150" is not a percentage between 0 and 100`, "Testfile:5"}},
		{"canary args", model("\t\tcanary u"), []string{"canary: no share; give one, as in `canary <upstream> [<model>] <percent>`", "Testfile:5"}},
		{"canary key", model("\t\tcanary u 5 {\n\t\t\tkey cookie session\n\t\t}"), []string{"canary key: expected `key header <name>`", "Testfile:6"}},
		{"canary promote", model("\t\tcanary u 5 {\n\t\t\tpromote 50 100\n\t\t}"), []string{"canary promote: expected `promote 5% for 3d, 50% for 7d, 100%`", "or `promote 50 100 every 10m`", "Testfile:6"}},
		{"canary unknown upstream", model("\t\tcanary nope 5"), []string{`model "m": canary: unknown upstream "nope"`, "Testfile:5"}},
		{"shadow unknown upstream", model("\t\tshadow nope 5"), []string{`model "m": shadow: unknown upstream "nope"`, "Testfile:5"}},
		{"shadow warn_similarity", model("\t\tshadow u 5 {\n\t\t\twarn_similarity high\n\t\t}"), []string{`shadow warn_similarity: "high" is not a ratio; write it like 0.95 or 95%`, "Testfile:6"}},
		{"shadow max", model("\t\tshadow u 5 {\n\t\t\tmax_concurrent none\n\t\t}"), []string{`shadow max_concurrent: "none" is not a positive whole number`, "Testfile:6"}},
		{"guard ratio", model("\t\tcanary u 5 {\n\t\t\tguard {\n\t\t\t\terror_rate 2\n\t\t\t}\n\t\t}"), []string{`guard error_rate: "2" is not a ratio`, "Testfile:7"}},
	} {
		expectParseError(t, tc.name, tc.in, tc.want...)
	}
}

// Load-time checks of the canary's shape (JSON configs included).
func TestCanaryValidatedAtProvision(t *testing.T) {
	r := &Relay{
		Upstreams: []*Upstream{{Name: "u", BaseURL: "http://u/v1"}, {Name: "c", BaseURL: "http://c/v1"}},
		Models: []*ModelRoute{{Alias: "m", Targets: []Target{{Upstream: "u"}},
			Canary: &Canary{Upstream: "c", Percent: 50, Promote: []float64{20}}}},
	}
	err := cfProvision(t, r)
	if err == nil || !strings.Contains(err.Error(), `model "m": canary:`) {
		t.Fatalf("err = %v (promotion steps must increase)", err)
	}
}

func TestCaddyfileSmoothing(t *testing.T) {
	r, err := cfParse(t, `llm_relay {
	upstream u http://u/v1
	model fast {
		to u
		smoothing off
	}
	model thinker {
		to u
		smoothing {
			reasoning hide
			max_delay 250ms
		}
	}
	model plain {
		to u
	}
	smoothing split-reasoning {
		max_delay 300ms
		reasoning_max_delay 2s
		reasoning_drain 200ms
		min_interval 20ms
		heartbeat 0
		early_commit 5s
	}
}`)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfProvision(t, r); err != nil {
		t.Fatal(err)
	}
	want := map[string]smoothPolicy{
		"plain": {cfg: pace.Config{Mode: pace.ModeSplit, MaxDelay: 300 * time.Millisecond, ReasoningMaxDelay: 2 * time.Second,
			MinInterval: 20 * time.Millisecond, ReasoningDrain: 200 * time.Millisecond}, earlyCommit: 5 * time.Second},
		"fast": {cfg: pace.Config{Mode: pace.ModeOff, MaxDelay: 300 * time.Millisecond, ReasoningMaxDelay: 2 * time.Second,
			MinInterval: 20 * time.Millisecond, ReasoningDrain: 200 * time.Millisecond}, earlyCommit: 5 * time.Second},
		"thinker": {cfg: pace.Config{Mode: pace.ModeSplit, MaxDelay: 250 * time.Millisecond, ReasoningMaxDelay: 2 * time.Second,
			MinInterval: 20 * time.Millisecond, ReasoningDrain: 200 * time.Millisecond, HideReasoning: true}, earlyCommit: 5 * time.Second},
	}
	for alias, w := range want {
		if got := r.routes[alias].smooth; got != w {
			t.Errorf("%s: policy %+v, want %+v", alias, got, w)
		}
	}
}

// TestCaddyfileSplitRatio: split_ratio at the relay level, a model's own
// overriding it, and a model without one keeping the relay's.
func TestCaddyfileSplitRatio(t *testing.T) {
	r, err := cfParse(t, `llm_relay {
	upstream u http://u/v1
	model keeps {
		to u
	}
	model own {
		to u
		smoothing {
			split_ratio 0
		}
	}
	smoothing split-reasoning {
		split_ratio 0.35
	}
}`)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfProvision(t, r); err != nil {
		t.Fatal(err)
	}
	for alias, want := range map[string]float64{"keeps": 0.35, "own": 0} {
		if got := r.routes[alias].smooth.cfg.SplitRatio; got == nil || *got != want {
			t.Errorf("%s: split ratio %v, want %v", alias, got, want)
		}
	}
	pol, err := resolveSmoothing(&Smoothing{Mode: "split-reasoning"}, nil)
	if err != nil || pol.cfg.SplitRatio != nil {
		t.Errorf("no split_ratio: %v, %v; want none", pol.cfg.SplitRatio, err)
	}
}

func TestSmoothingDefaults(t *testing.T) {
	cases := []struct {
		name   string
		relay  *Smoothing
		mode   pace.Mode
		hb     time.Duration
		maxDel time.Duration
	}{
		{"no block: off, heartbeats on", nil, pace.ModeOff, 15 * time.Second, 400 * time.Millisecond},
		{"a block without a mode paces", &Smoothing{}, pace.ModePace, 15 * time.Second, 400 * time.Millisecond},
	}
	for _, c := range cases {
		pol, err := resolveSmoothing(c.relay, nil)
		if err != nil {
			t.Fatal(err)
		}
		if pol.cfg.Mode != c.mode || pol.cfg.Heartbeat != c.hb || pol.cfg.MaxDelay != c.maxDel ||
			pol.cfg.MinInterval != 30*time.Millisecond || pol.cfg.ReasoningMaxDelay != 1500*time.Millisecond || pol.earlyCommit != 0 {
			t.Errorf("%s: %+v", c.name, pol)
		}
	}
}

func TestCaddyfileSmoothingErrors(t *testing.T) {
	// The smoothing block starts at Testfile:6.
	ok := func(body string) string {
		return "llm_relay {\n\tupstream u http://u/v1\n\tmodel m {\n\t\tto u\n\t}\n" + body + "\n}"
	}
	for _, tc := range []struct {
		name string
		in   string
		want []string
	}{
		{"unknown mode", ok("\tsmoothing fast"), []string{`smoothing: unknown mode "fast"; write ` + "`smoothing off`", "Testfile:6"}},
		{"two modes", ok("\tsmoothing pace off"), []string{`got extra argument "off"`, "Testfile:6"}},
		{"twice", ok("\tsmoothing pace\n\tsmoothing off"), []string{"smoothing is already specified", "Testfile:7"}},
		{"unknown setting", ok("\tsmoothing {\n\t\tdelay 1s\n\t}"), []string{`unrecognized smoothing subdirective "delay"; expected max_delay`, "Testfile:7"}},
		{"bad duration", ok("\tsmoothing {\n\t\tmax_delay soon\n\t}"), []string{`max_delay: "soon" is not a positive duration`, "Testfile:7"}},
		{"zero max_delay", ok("\tsmoothing {\n\t\tmax_delay 0\n\t}"), []string{`max_delay: "0" is not a positive duration`, "Testfile:7"}},
		{"no value", ok("\tsmoothing {\n\t\tmin_interval\n\t}"), []string{"smoothing: expected `min_interval <value>`, got 0 values", "Testfile:7"}},
		{"bad heartbeat", ok("\tsmoothing {\n\t\theartbeat -1s\n\t}"), []string{`heartbeat: "-1s" is not a duration; write it like 15s, or 0 to turn it off`, "Testfile:7"}},
		{"bad reasoning", ok("\tsmoothing {\n\t\treasoning maybe\n\t}"), []string{`reasoning: "maybe" is not show or hide`, "Testfile:7"}},
		{"min_interval over max_delay", ok("\tsmoothing {\n\t\tmin_interval 500ms\n\t}"),
			[]string{"smoothing: min_interval 500ms is longer than max_delay 400ms", "Testfile:6"}},
		{"model block merged with relay level", "llm_relay {\n\tupstream u http://u/v1\n\tmodel m {\n\t\tto u\n\t\tsmoothing {\n\t\t\tmax_delay 50ms\n\t\t}\n\t}\n\tsmoothing {\n\t\tmin_interval 100ms\n\t\tmax_delay 1s\n\t}\n}",
			[]string{`model "m": smoothing: min_interval 100ms is longer than max_delay 50ms`, "Testfile:5"}},
		{"split_ratio above 1", ok("\tsmoothing split-reasoning {\n\t\tsplit_ratio 1.5\n\t}"), []string{"split_ratio 1.5 is not a share: give a number from 0 to 1", "Testfile:7"}},
		{"split_ratio not a number", ok("\tsmoothing split-reasoning {\n\t\tsplit_ratio third\n\t}"), []string{`split_ratio "third" is not a number`, "Testfile:7"}},
		{"model smoothing twice", "llm_relay {\n\tupstream u http://u/v1\n\tmodel m {\n\t\tto u\n\t\tsmoothing pace\n\t\tsmoothing off\n\t}\n}",
			[]string{`model "m": smoothing is already specified`, "Testfile:6"}},
	} {
		expectParseError(t, tc.name, tc.in, tc.want...)
	}
}

// JSON configs (caddy adapt output, or hand-written) are checked at
// provision with the same rules.
func TestSmoothingJSONValidation(t *testing.T) {
	r := &Relay{
		Upstreams: []*Upstream{{Name: "u", BaseURL: "http://u/v1"}},
		Models:    []*ModelRoute{{Alias: "m", Targets: []Target{{Upstream: "u"}}}},
		Smoothing: &Smoothing{Mode: "turbo"},
	}
	err := cfProvision(t, r)
	if err == nil || !strings.Contains(err.Error(), `smoothing: unknown smoothing mode "turbo"`) {
		t.Fatalf("err = %v", err)
	}
}

// expectParseError fails unless parsing in gives an error containing every
// want (the message and the Testfile:<line> it names).
func expectParseError(t *testing.T, name, in string, want ...string) {
	t.Helper()
	_, err := cfParse(t, in)
	if err == nil {
		t.Errorf("%s: no error", name)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error %q does not contain %q", name, err, w)
		}
	}
}
