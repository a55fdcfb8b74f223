package llmrelay

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/gemini"
	"github.com/llmrelay/caddy-llm-relay/internal/health"
	"github.com/llmrelay/caddy-llm-relay/internal/jsonobj"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/reasoninghealth"
	"github.com/llmrelay/caddy-llm-relay/internal/thinktag"
)

// route is a compiled ModelRoute.
type route struct {
	alias   string
	targets []*target
	capped  bool // a target has a cap: the request's order spills over (capacity.go)
	smooth  smoothPolicy
	canary  *canaryRuntime // nil: none
	shadow  *shadowRuntime // nil: none
	reason  reasoningPolicy
	// reasoningField renames reasoning text for Chat clients ("": as sent);
	// read it through fieldFor.
	reasoningField string
	// handoff is a hand-off alias's reasoning leg and its settings
	// (handoff.go); nil: an ordinary alias.
	handoff *handoffRoute
	// pin is the model's region_pin ("": none; regions.go).
	pin string
	// judgesEffort: something reads a request's effort key (the targets'
	// reasoning SLO or the canary guard's reasoning_floor), so serve
	// works it out (setReasoningSLO).
	judgesEffort bool
	// cont is the model's after_commit (continuation.go).
	cont continuePolicy
}

// target is a compiled Target.
type target struct {
	up    *upstreamRuntime
	model string // "" = forward the client's model unchanged
	// quotedModel is model as a JSON string, made once (see newTarget).
	quotedModel json.RawMessage
	edits       []bodyEdit
	rank        int
	weight      int
	health      *health.Target // shared across reloads; see health.go
	entry       *healthEntry
	slo         health.SLO
	rslo        reasoninghealth.Config // the SLO's reasoning_floor and cluster_rate (reasoninghealth.go)
	// caps are the upstream's and the target's max_concurrent (nil: no
	// cap), counted across reloads; see capacity.go.
	caps []*capCounter
	// think is the syntax of the model's inline reasoning tags, nil when
	// its reasoning comes in fields (see InlineReasoning).
	think *thinktag.Syntax
	// noPrefill: as a hand-off's answer target, it refused the reasoning
	// as a prefill; it gets it in the user turn (handoff.go). A pointer:
	// a degraded copy of the target shares it.
	noPrefill *atomic.Bool
}

// modelJSON is the target's model as a JSON string.
func (t *target) modelJSON() json.RawMessage {
	if t.quotedModel == nil {
		m, _ := json.Marshal(t.model)
		return m // a target built without newTarget (tests)
	}
	return t.quotedModel
}

// newTarget is a target for model on up; the model's JSON is made once.
func newTarget(up *upstreamRuntime, model string) *target {
	t := &target{up: up, model: model, weight: 1, noPrefill: new(atomic.Bool)}
	if up != nil { // tests build targets of no upstream
		t.think = up.think
	}
	if model != "" {
		t.quotedModel, _ = json.Marshal(model)
	}
	return t
}

// jsonString is the value of the JSON string literal raw, or "" if raw is
// not a string, as encoding/json decodes it. A plain literal (no escapes,
// valid UTF-8) costs one copy.
func jsonString(raw []byte) string {
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' && bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// bodyEdit is one `set` or `unset` of a request body field, by path.
type bodyEdit struct {
	path  []string
	value json.RawMessage // nil = unset
}

// compileRoutes resolves each route's upstream names and parses its edits.
func (h *Relay) compileRoutes() error {
	h.routes = make(map[string]*route, len(h.Models))
	h.wildcard = nil
	if _, err := resolveSmoothing(h.Smoothing, nil); err != nil {
		return fmt.Errorf("smoothing: %w", err)
	}
	seen := make(map[string]bool, len(h.Models))
	for i, m := range h.Models {
		if m == nil {
			return fmt.Errorf("model %d: an alias is required; give the model name clients use, or * for any", i+1)
		}
		if err := checkModelAlias(m.Alias, seen); err != nil {
			return fmt.Errorf("model %d: %w", i+1, err)
		}
		seen[m.Alias] = true
		if len(m.Targets) == 0 {
			return errNoTargets(m.Alias)
		}
		rt := &route{alias: m.Alias, reasoningField: cmp.Or(m.ReasoningField, h.ReasoningField)}
		var err error
		if rt.smooth, err = resolveSmoothing(h.Smoothing, m.Smoothing); err != nil {
			return fmt.Errorf("model %q: smoothing: %w", m.Alias, err)
		}
		if rt.targets, rt.capped, err = h.compileTargets(m, m.Targets, "target"); err != nil {
			return err
		}
		if rt.handoff, err = h.compileHandoff(m); err != nil {
			return err
		}
		rt.pin = m.RegionPin
		rt.cont = resolveContinue(h.Failover, m.Failover)
		if rt.handoff != nil {
			rt.handoff.reason.pin = m.RegionPin // both legs keep to it
		}
		if c := m.Canary; c != nil && h.upstreams[c.Upstream] == nil {
			return errUnknownUpstream(m.Alias, "canary", c.Upstream)
		}
		if s := m.Shadow; s != nil && h.upstreams[s.Upstream] == nil {
			return errUnknownUpstream(m.Alias, "shadow", s.Upstream)
		}
		if err := h.compileCanaryShadow(rt, m); err != nil {
			return fmt.Errorf("model %q: %w", m.Alias, err)
		}
		setReasoningSLO(rt, m, resolveReasoningSLO(h.SLO, m.SLO))
		if rt.reason, err = resolveReasoning(h, m); err != nil {
			return fmt.Errorf("model %q: %w", m.Alias, err)
		}
		if m.Alias == "*" {
			h.wildcard = rt
			continue
		}
		h.routes[m.Alias] = rt
	}
	h.modelList = buildModelList(h.Models)
	return nil
}

// compileTargets compiles a chain's targets (`to` lines, or a hand-off
// alias's `reason` lines: what names them in errors).
func (h *Relay) compileTargets(m *ModelRoute, targets []Target, what string) (out []*target, capped bool, err error) {
	for j, t := range targets {
		up, ok := h.upstreams[t.Upstream]
		if !ok {
			return nil, false, errUnknownUpstream(m.Alias, fmt.Sprintf("%s %d", what, j+1), t.Upstream)
		}
		ct := newTarget(up, t.Model)
		ct.rank, ct.weight = t.Rank, max(1, t.Weight)
		if ct.think, err = up.inline.over(t.InlineReasoning).syntax(); err != nil {
			return nil, false, fmt.Errorf("model %q: %s %d: %w", m.Alias, what, j+1, err)
		}
		if ct.rank == 0 {
			ct.rank = j + 1
		}
		slo := resolveSLO(h.SLO, m.SLO)
		if err := checkSLOSamples(slo.Window, slo.MinSamples); err != nil {
			return nil, false, fmt.Errorf("model %q: %w", m.Alias, err)
		}
		if err := h.attachHealth(ct, slo); err != nil {
			return nil, false, fmt.Errorf("model %q: %s %d: %w", m.Alias, what, j+1, err)
		}
		if err := h.attachCaps(ct, m.Alias, t.MaxConcurrent); err != nil {
			return nil, false, fmt.Errorf("model %q: %s %d: %w", m.Alias, what, j+1, err)
		}
		capped = capped || len(ct.caps) > 0
		for _, field := range slices.Sorted(maps.Keys(t.Set)) {
			val := t.Set[field]
			if !json.Valid(val) {
				return nil, false, fmt.Errorf("model %q: %s %d: set %s: value is not valid JSON", m.Alias, what, j+1, field)
			}
			if err := checkFieldPath(field); err != nil {
				return nil, false, fmt.Errorf("model %q: %s %d: set %s: %w", m.Alias, what, j+1, field, err)
			}
			ct.edits = append(ct.edits, bodyEdit{path: strings.Split(field, "."), value: val})
		}
		for _, field := range t.Unset {
			if err := checkFieldPath(field); err != nil {
				return nil, false, fmt.Errorf("model %q: %s %d: unset %s: %w", m.Alias, what, j+1, field, err)
			}
			ct.edits = append(ct.edits, bodyEdit{path: strings.Split(field, ".")})
		}
		out = append(out, ct)
	}
	return out, capped, nil
}

// lookup finds the route for a client's model name: exact alias, else `*`.
func (h *Relay) lookup(model string) *route {
	if rt, ok := h.routes[model]; ok {
		return rt
	}
	return h.wildcard
}

// checkFieldPath validates the field of a `set`/`unset`: dotted names with
// no empty segment, and never `model`, which the `to` line owns.
func checkFieldPath(field string) error {
	if slices.Contains(strings.Split(field, "."), "") {
		return fmt.Errorf("empty name in field path %q; write nested fields like reasoning.max_tokens", field)
	}
	if field == "model" {
		return fmt.Errorf("the model is set by the `to` line: write `to <upstream> <upstream_model>` instead")
	}
	return nil
}

// requestBody is a client's JSON body, split into top-level fields so each
// attempt can rewrite a few of them without re-parsing the rest, and
// render it by splicing: the untouched fields go out as the client wrote
// them (see internal/jsonobj).
type requestBody struct {
	raw       []byte                     // as the client sent it, but for an extra_body merged in
	merged    bool                       // raw had an extra_body: it is a new slice, not the client's bytes
	members   []jsonobj.Member           // its top-level members, in order, pointing into raw
	unique    bool                       // no key repeats: the body can be spliced
	fields    map[string]json.RawMessage // members by key, with the relay's own changes (set, del, setPath)
	changes   []jsonobj.Edit             // the relay's changes to fields, in order, for splicing
	buf       *bodyBuffer                // raw's pooled buffer, or nil (see bodyBuffer)
	model     string
	stream    bool
	relayMode string // relay.mode, the client's smoothing mode (or split-reasoning, from reasoning_dispersion)
	dispersed bool   // the body has reasoning_dispersion, which the upstream must not see
	traced    bool   // the body has return_reasoning_trace, which the upstream must not see
	trace     bool   // return_reasoning_trace is true (see reasoningtrace.go)
	budget    int    // the request's reasoning budget, for `set ... {llm_relay.reasoning_budget}`
	// assemble: a non-stream Chat request sent upstream as a stream, whose
	// chunks the relay assembles into one answer (see reasoningtrace.go).
	// stream is then true, as the upstream sees it; clientStream is the
	// client's view.
	assemble bool
	// splitRatio is relay.split_ratio, the client's share for the
	// reasoning lane in split-reasoning; nil: none asked.
	splitRatio *float64
	// mark, for a continuation's body (continuation.go), edits the Chat
	// payload sent upstream: DeepSeek's prefix flag, vLLM's
	// continue_final_message. nil: none.
	mark func([]byte) ([]byte, error)
	// native is a Gemini client's own body (gemini.go), which a Gemini
	// target gets as it is when nothing was changed in the Chat body it
	// was translated into: what Chat has no place for (includeThoughts
	// without a budget, safetySettings, topK, ...) is kept. When the
	// relay changed something, the translation gets those back
	// (gemini.KeepNative). nil: none.
	native []byte
}

// parseRequestBody parses a client body, its extra_body merged in first
// (see mergeExtraBody). It returns errInvalidJSON, errMissingModel,
// errInvalidRelayField and the like for the relay's own 400 answers.
func parseRequestBody(b []byte) (*requestBody, error) {
	members, err := jsonobj.Split(b)
	if err != nil {
		return nil, errInvalidJSON
	}
	b, members, merged, err := mergeExtraBody(b, members)
	if err != nil {
		return nil, err
	}
	fields := jsonobj.Map(members)
	rb := &requestBody{raw: b, members: members, unique: jsonobj.Unique(members), fields: fields, merged: merged}
	if raw, ok := fields["model"]; ok {
		rb.model = jsonString(raw)
	}
	if rb.model == "" {
		return nil, errMissingModel
	}
	if raw, ok := fields["stream"]; ok {
		rb.stream = string(raw) == "true"
	}
	if raw, ok := fields["relay"]; ok {
		opts, err := parseRelayOptions(raw)
		if err != nil {
			return nil, err
		}
		rb.relayMode, rb.splitRatio = opts.Mode, opts.SplitRatio
	}
	if raw, ok := fields["reasoning_dispersion"]; ok {
		// Other relays' knob for re-pacing reasoning: true asks for
		// split-reasoning, unless relay.mode says otherwise.
		rb.dispersed = true
		switch string(raw) {
		case "true":
			if rb.relayMode == "" {
				rb.relayMode = pace.ModeSplit.String()
			}
		case "false", "null":
		default:
			return nil, errInvalidDispersion
		}
	}
	if raw, ok := fields[fieldTrace]; ok {
		rb.traced = true
		switch string(raw) {
		case "true":
			rb.trace = true
		case "false", "null":
		default:
			return nil, errInvalidTrace
		}
	}
	return rb, nil
}

// clientStream reports whether the client asked for a stream (and gets
// one): not a request the relay streams only to assemble its answer.
func (rb *requestBody) clientStream() bool { return rb.stream && !rb.assemble }

// forTarget renders the body sent to one target: its model, the relay's
// own `relay` field removed, translated into the upstream's dialect when
// it differs from the client's, then the target's edits. The edits come
// last because the operator writes them for the upstream: `set max_tokens`
// on an Anthropic target means Anthropic's max_tokens, whatever the client
// spoke.
func (rb *requestBody) forTarget(t *target, x exchange) (payload, error) {
	if rb.native != nil && x.upstream == dialectGemini && len(rb.changes) == 0 && len(t.edits) == 0 {
		// A Gemini client's body for a Gemini target, untouched (the
		// model and the method go in the path).
		return bytesPayload(rb.native), nil
	}
	if !x.crosses() && x.client == dialectChat && gemini.HasSignatures(rb.raw) {
		// A history with thought signatures in its tool call ids (from
		// a Gemini client, or a Gemini target's earlier answer) loses
		// them for a target that is not Gemini (translateRequest does the
		// same for one that is translated).
		p, err := rb.forTargetByMap(t, x)
		if err != nil {
			return p, err
		}
		return bytesPayload(gemini.StripSignatures(p.Bytes())), nil
	}
	if x.crosses() || !rb.unique {
		return rb.forTargetByMap(t, x)
	}
	// The common case: the same dialect. Every change is a top-level edit
	// spliced into the client's bytes; the rest of the body, a megabyte
	// prompt included, is copied, never decoded or encoded again.
	edits := make([]jsonobj.Edit, 0, len(rb.changes)+2+len(t.edits))
	edits = append(edits, rb.changes...)
	edits = append(edits, jsonobj.Edit{Key: "relay"})
	if rb.dispersed {
		edits = append(edits, jsonobj.Edit{Key: "reasoning_dispersion"})
	}
	if rb.traced {
		edits = append(edits, jsonobj.Edit{Key: fieldTrace})
	}
	if t.model != "" {
		edits = append(edits, jsonobj.Edit{Key: "model", Value: t.modelJSON()})
	}
	for _, e := range t.edits {
		value, ok := rb.editValue(e)
		if !ok {
			continue
		}
		if len(e.path) == 1 {
			edits = append(edits, jsonobj.Edit{Key: e.path[0], Value: value})
			continue
		}
		// A nested edit rewrites its top-level member as a whole.
		top := map[string]json.RawMessage{}
		v, edited := jsonobj.LastEdit(edits, e.path[0])
		if !edited {
			v = rb.fields[e.path[0]]
		}
		if v != nil {
			top[e.path[0]] = v
		}
		if err := applyEdit(top, e.path, value); err != nil {
			return payload{}, err
		}
		edits = append(edits, jsonobj.Edit{Key: e.path[0], Value: top[e.path[0]]})
	}
	p := piecesPayload(jsonobj.Pieces(make([][]byte, 0, 4+3*len(edits)), rb.raw, rb.members, edits))
	p.buf = rb.buf // its pieces point into raw
	return p, nil
}

// forTargetByMap is forTarget through a map of the members: for a body
// translated into another dialect, or one that repeats a key (encoding/json
// keeps the last; so does the map).
func (rb *requestBody) forTargetByMap(t *target, x exchange) (payload, error) {
	fields := make(map[string]json.RawMessage, len(rb.fields)+len(t.edits))
	for k, v := range rb.fields {
		fields[k] = v
	}
	delete(fields, "relay")
	delete(fields, "reasoning_dispersion")
	delete(fields, fieldTrace)
	if t.model != "" {
		fields["model"] = t.modelJSON()
	}
	if x.crosses() {
		b, err := json.Marshal(fields)
		if err != nil {
			return payload{}, err
		}
		if b, err = x.translateRequest(b); err != nil {
			return payload{}, err
		}
		if rb.native != nil && x.upstream == dialectGemini {
			// A Gemini client's request the relay changed, for a
			// Gemini target: what Chat has no place for is put back.
			if b, err = gemini.KeepNative(b, rb.native); err != nil {
				return payload{}, err
			}
		}
		fields = nil
		if err := json.Unmarshal(b, &fields); err != nil {
			return payload{}, fmt.Errorf("translated body: %w", err)
		}
	}
	for _, e := range t.edits {
		value, ok := rb.editValue(e)
		if !ok {
			continue
		}
		if err := applyEdit(fields, e.path, value); err != nil {
			return payload{}, err
		}
	}
	b, err := json.Marshal(fields)
	return bytesPayload(b), err
}

// editValue is the value a target's edit sets: the request's reasoning
// budget for the budget placeholder (ok false: the request has none, the
// edit does not apply).
func (rb *requestBody) editValue(e bodyEdit) (json.RawMessage, bool) {
	if string(e.value) != budgetPlaceholder {
		return e.value, true
	}
	if rb.budget == 0 {
		return nil, false
	}
	return json.RawMessage(strconv.Itoa(rb.budget)), true
}

// set, del and setPath change the client's body for every target: the
// relay's own edits (effort, thinking, stream_options), kept in fields for
// what reads them and in changes for the splice.
func (rb *requestBody) set(key string, value json.RawMessage) {
	rb.fields[key] = value
	rb.changes = append(rb.changes, jsonobj.Edit{Key: key, Value: value})
}

func (rb *requestBody) del(key string) {
	delete(rb.fields, key)
	rb.changes = append(rb.changes, jsonobj.Edit{Key: key})
}

func (rb *requestBody) setPath(path []string, value json.RawMessage) error {
	if err := applyEdit(rb.fields, path, value); err != nil {
		return err
	}
	rb.changes = append(rb.changes, jsonobj.Edit{Key: path[0], Value: rb.fields[path[0]]}) // nil: gone
	return nil
}

// applyEdit sets (value != nil) or removes the field at path, creating
// intermediate objects as needed when setting.
func applyEdit(obj map[string]json.RawMessage, path []string, value json.RawMessage) error {
	if len(path) == 1 {
		if value == nil {
			delete(obj, path[0])
		} else {
			obj[path[0]] = value
		}
		return nil
	}
	child := map[string]json.RawMessage{}
	if raw, ok := obj[path[0]]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &child); err != nil {
			if value == nil {
				return nil // nothing nested to remove
			}
			return fmt.Errorf("set %s: field %q is not an object", strings.Join(path, "."), path[0])
		}
	} else if value == nil {
		return nil
	}
	if err := applyEdit(child, path[1:], value); err != nil {
		return err
	}
	b, err := json.Marshal(child)
	if err != nil {
		return err
	}
	obj[path[0]] = b
	return nil
}

// modelEntry is one item of the OpenAI model list.
type modelEntry struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// buildModelList renders the GET /v1/models answer: the configured aliases
// (not `*`), in config order.
func buildModelList(models []*ModelRoute) []byte {
	list := struct {
		Object string       `json:"object"`
		Data   []modelEntry `json:"data"`
	}{Object: "list", Data: []modelEntry{}}
	for _, m := range models {
		if m.Alias != "*" {
			list.Data = append(list.Data, modelEntry{ID: m.Alias, Object: "model", OwnedBy: "llm-relay"})
		}
	}
	b, _ := json.Marshal(list)
	return b
}

// modelObject renders GET /v1/models/<alias>.
func modelObject(alias string) []byte {
	b, _ := json.Marshal(modelEntry{ID: alias, Object: "model", OwnedBy: "llm-relay"})
	return b
}

// fieldFor is the reasoning_field req's answer is written with: the
// route's, a Chat client's choice of where its reasoning goes, or none
// for a Gemini client, whose request is a Chat request inside
// (gemini.go) but whose reasoning goes out as thought parts whatever a
// Chat client would read (inline, it would be tags in the answer's text).
func (rt *route) fieldFor(req *requestState) string {
	if req.gemini {
		return ""
	}
	return rt.reasoningField
}
