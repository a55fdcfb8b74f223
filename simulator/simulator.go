// Package simulator is the llm_simulator Caddy module: a fake LLM
// provider on one machine. The work is done by internal/sim; this package
// only turns Caddy config (JSON or Caddyfile) into a sim.Config. The relay's
// root package imports it, so any build with the relay has the simulator.
package simulator

import (
	"fmt"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmrelay/caddy-llm-relay/internal/sim"
)

func init() {
	caddy.RegisterModule(Simulator{})
}

// Simulator is the `llm_simulator` handler: a fake LLM provider, speaking
// OpenAI Chat Completions, OpenAI Responses, Anthropic Messages and
// Gemini, for running, demonstrating, testing and benchmarking a relay on
// one machine with no API keys. It answers `POST .../chat/completions`,
// `POST .../responses`, `POST .../messages` (each streaming or not),
// `POST .../messages/count_tokens`, `GET .../models`, and Gemini's
// `POST .../models/{model}:generateContent`, `:streamGenerateContent`
// (SSE with `?alt=sse`, else a streamed JSON array), `:countTokens` and
// `GET .../v1beta/models` under any path prefix. Keys are not checked.
//
// Every response carries the same deterministic text, chosen by `seed`:
// a reasoning phase streamed as DeepSeek-style `reasoning_content`
// deltas (or inline in `content` between think tags, see
// `reasoning_form`), then the answer as `content` deltas; on Messages the same texts
// come as a thinking block (only when the request enables thinking, with
// a signature) and a text block; on Responses as a reasoning item's
// summary (only when the request sets `reasoning` with an effort other
// than "none") and a message item; on Gemini as parts with
// `"thought": true` (only when generationConfig.thinkingConfig sets
// includeThoughts, as Gemini does) and text parts, the first part after
// the thoughts carrying a thoughtSignature. A request that forces a tool
// call (Gemini: functionCallingConfig mode ANY) gets one, with the fixed
// input {"input":"sim"}, unless its last turn is a tool result. The text mixes ASCII
// words, punctuation, newlines, CJK, multi-codepoint emoji and combining
// accents, to catch relays that mangle UTF-8. Faults (error statuses,
// stalls, dropped connections, in-band stream errors) are injected with
// seeded, per-request probabilities.
//
// The simulator is terminal: it never calls the next handler.
type Simulator struct {
	// `model <name...>`: the model IDs listed by `GET .../models`.
	// Repeatable. Requests may name any model; it is echoed back.
	// Default: `sim-reasoner`.
	Models []string `json:"models,omitempty"`

	// `seed <int>`: selects the generated text and the sequence of fault
	// draws; the same seed gives the same text and, for the n-th request,
	// the same fault outcome. Default: 1.
	Seed int64 `json:"seed,omitempty"`

	// `reasoning_tokens <n>`: the number of reasoning pieces
	// (reasoning_content deltas in the fields form) per response; 0 means no reasoning phase. Default: 60.
	ReasoningTokens *int `json:"reasoning_tokens,omitempty"`

	// `content_tokens <n>`: the number of content deltas per response.
	// Default: 40.
	ContentTokens *int `json:"content_tokens,omitempty"`

	// `reasoning_form fields|tags|tags_unopened`: how chat completions
	// carry the reasoning. `fields` sends `reasoning_content` deltas;
	// `tags` sends it inline in `content` as `<think>\n` + reasoning +
	// `\n</think>\n\n` + answer, as Qwen3 and QwQ behind vLLM, SGLang or
	// Ollama without a reasoning parser do; `tags_unopened` the same
	// without the opening tag, as DeepSeek-R1 and its distills do.
	// Streamed tags are cut at seeded byte points (`<th` + `ink>`) or
	// glued to their neighbours' text; the usage then has no
	// reasoning_tokens detail. A request's `X-Sim-Reasoning-Form` header
	// overrides it. Messages and Responses ignore it. Default: `fields`.
	ReasoningForm string `json:"reasoning_form,omitempty"`

	// `echo handoff`: every answer echoes the reasoning a hand-off
	// injected into its request, for tests of the injection: no
	// reasoning (no reasoning_content, thinking block or reasoning item,
	// whatever the request asks), and the answer text
	// `handoff:<where>:<reasoning>`, where `<where>` is `prefill` (the
	// last turn is an assistant's holding the wrapper), `user` (the last
	// user turn holds it) or `system` (the system prompt, system or
	// developer message, or instructions do), searched in that order, and
	// `<reasoning>` the text between `<think>\n` and `\n</think>` there,
	// byte for byte; `handoff:none:` when the request carries none. The
	// text is streamed in pieces of 4 characters, one output token each.
	// The reasoning form still shapes chat completions (an empty think
	// block in the tags forms), and a forced tool call is still made. A
	// request's `X-Sim-Echo: handoff` header sets it for that request.
	// All three endpoints. Default: off.
	Echo string `json:"echo,omitempty"`

	// `tool_calls forced|auto`: when a request gets a tool call. `forced`:
	// only when it forces one (Chat tool_choice "required" or a named
	// function, Messages "any" or a named tool, Responses "required" or a
	// named function, Gemini functionCallingConfig mode ANY). `auto`:
	// also when it has tools and leaves the choice to the model (no tool
	// choice or "auto"; Gemini no mode, AUTO or VALIDATED), which then
	// calls its first tool, as a model that decides to would: how a
	// client that never forces a call (Gemini CLI, Claude Code, Codex)
	// is made to run a tool. Never with "none", nor when the last turn is
	// the tool's result. A request's `X-Sim-Tool-Calls` header sets it for
	// that request. Default: `forced`.
	ToolCalls string `json:"tool_calls,omitempty"`

	// `reasoning_pattern <kind> [<args...>]` (or `pattern`, which sets
	// both phases): how reasoning deltas are paced. Default: steady at 50
	// tokens per second.
	ReasoningPattern *SimulatorPattern `json:"reasoning_pattern,omitempty"`

	// `content_pattern <kind> [<args...>]` (or `pattern`): how content
	// deltas are paced. Default: steady at 50 tokens per second.
	ContentPattern *SimulatorPattern `json:"content_pattern,omitempty"`

	// `ttfb <duration>`: waits this long before sending the response
	// headers and first event of a stream, or the whole body of a
	// non-streaming response. Fault statuses are answered at once.
	// Default: 0.
	TTFB caddy.Duration `json:"ttfb,omitempty"`

	// `latency <duration>`: a network delay before every answer, GET
	// .../models and fault statuses included, as a far region adds to
	// each round trip (ttfb comes after it). Default: 0.
	Latency caddy.Duration `json:"latency,omitempty"`

	// `continue_overlap <runes>`: how a continuation starts. A request
	// that asks to continue an answer (its conversation ends with an
	// assistant turn holding the answer so far: a Messages prefill, a
	// Chat assistant message, with or without DeepSeek's and Mistral's
	// `"prefix": true` or vLLM's `"continue_final_message": true`, a
	// Responses assistant message item; or with that turn and then a user
	// turn whose text starts with "Your previous reply was cut off", the
	// relay's continue instruction) gets, when the answer the simulator
	// gives the conversation without that tail starts with it (or with
	// it right-trimmed of white space, as a relay sends an Anthropic
	// prefill), the rest of that answer only: no reasoning, the rest of
	// the text, the usual end and usage. Since the text depends on the
	// seed only (or, with `echo handoff`, on the conversation without
	// the tail), a second simulator with the same seed continues what a
	// first one sent. `continue_overlap` makes the continuation first
	// repeat the last `<runes>` runes of the answer so far (all of it
	// when shorter), as a model that restarts a few tokens back does,
	// for tests of a relay's overlap trimming. Otherwise the request is
	// answered as usual. Default: 0.
	ContinueOverlap int `json:"continue_overlap,omitempty"`

	// `fail`, `overloaded`, `stall`, `drop_after`, `error_after`,
	// `drop_in`, `error_in`, `drop_before_end` and `error_before_end`:
	// faults, evaluated in the order written for every chat completion,
	// responses, messages and count_tokens request (one counter for all); the
	// first whose rate draw hits is applied (Gemini's generateContent,
	// streamGenerateContent and countTokens too). On the Messages
	// endpoints errors have Anthropic's shape, on Gemini's Google's
	// ({"error":{"code","message","status"}}). Default: none.
	Faults []SimulatorFault `json:"faults,omitempty"`

	server *sim.Server
}

// SimulatorPattern paces one phase of a simulated stream.
type SimulatorPattern struct {
	// `steady` emits tokens at an even rate; `clustered` emits bursts of
	// tokens a few milliseconds apart separated by pauses, as reasoning
	// models do. Default: `steady`.
	Kind string `json:"kind,omitempty"`

	// Steady only: tokens per second; 0 means as fast as possible.
	// Caddyfile: `pattern steady [<tokens_per_sec>]`. Default: 50.
	Rate *float64 `json:"rate,omitempty"`

	// Clustered only: tokens per burst. Caddyfile: `pattern clustered
	// [<burst_tokens> [<pause> [<spread>]]]`. Default: 20.
	Burst int `json:"burst,omitempty"`

	// Clustered only: silence between bursts. Default: 800ms.
	Pause caddy.Duration `json:"pause,omitempty"`

	// Clustered only: the time one whole burst is spread over. Default: 5ms.
	Spread caddy.Duration `json:"spread,omitempty"`
}

// SimulatorFault is one injected failure.
type SimulatorFault struct {
	// One of:
	//   - `status` (`fail <status> [<rate>] [retry_after <value>]`):
	//     answers `status` with an OpenAI error JSON body (Anthropic's
	//     on Messages, error type by status: 529 is overloaded_error);
	//   - `overloaded` (`overloaded [<rate>] [retry_after <value>]`):
	//     the provider is overloaded: 529 with Anthropic's
	//     overloaded_error on Messages, and 503 with an OpenAI error
	//     (code "overloaded") on chat completions and responses, since
	//     OpenAI has no 529; Gemini's 503 UNAVAILABLE "The model is
	//     overloaded" on the Gemini endpoints (any status there gets
	//     Google's status name, and retry_after in whole seconds also a
	//     google.rpc.RetryInfo retryDelay);
	//   - `stall` (`stall [<rate>]`): accepts the request and never
	//     answers, not even headers, until the client goes away or the
	//     config is unloaded;
	//   - `drop` (`drop_after <events> [<rate>]`, `drop_in <phase>
	//     [<rate>]`, `drop_before_end [<rate>]`): streams `after` data
	//     events (or up to the middle of phase `in`, or all but the end
	//     event with `before_end`), then aborts the connection with no
	//     `[DONE]`; a non-streaming request gets its connection closed;
	//   - `error` (`error_after <events> [<rate>]`, `error_in <phase>
	//     [<rate>]`, `error_before_end [<rate>]`): streams `after` data
	//     events, then an in-band `data: {"error":{...}}` event, and ends
	//     without `[DONE]` (on Messages: `event: error` with Anthropic's
	//     overloaded_error, and no message_stop; on Responses: `event:
	//     error` with the error nested under "error" and flat, and no
	//     response.completed; on Gemini: a `{"error":{"code":500,...}}`
	//     chunk instead of the one with the finishReason); a
	//     non-streaming request gets a 500.
	Kind string `json:"kind"`

	// `status` only: the HTTP status to answer, 400-599.
	Status int `json:"status,omitempty"`

	// `status` and `overloaded` only: sent verbatim as the Retry-After
	// header, e.g. `2` or an HTTP date. Default: no header.
	RetryAfter string `json:"retry_after,omitempty"`

	// `drop` and `error` only: the number of data events (the role chunk
	// and token deltas) sent before the fault, which trips right after
	// the `after`-th (`drop_after 1`: the first data event and nothing
	// else); 0 means before any data; beyond the last delta, before the
	// finish.
	// On Messages the same positions count: message_start and each
	// thinking, text or input_json delta; on Responses response.created
	// and each reasoning summary, output text or arguments delta.
	After int `json:"after,omitempty"`

	// `drop` and `error` only (`drop_in <phase>`, `error_in <phase>`):
	// cut the stream in the middle of a phase instead of after `after`
	// events: `reasoning` (reasoning_content, thinking or reasoning
	// summary deltas), `answer` (text deltas) or `tool_args` (a tool
	// call's argument deltas). The fault trips right after m of the
	// phase's k deltas, m drawn by seed and request number between k/4
	// and 3k/4 (at least 1, below k when k > 1), so a tool call is left
	// half sent. A request whose answer has no such phase (no reasoning
	// asked for, a tool call for `answer`, text for `tool_args`, a
	// continuation for `reasoning`) is answered whole. `after` must then
	// be 0. Default: none.
	In string `json:"in,omitempty"`

	// `drop` and `error` only (`drop_before_end`, `error_before_end`):
	// send everything but the stream's end event, then the fault: Chat
	// after the finish chunk and the usage chunk, before `[DONE]`;
	// Messages after message_delta, before message_stop; Responses
	// before response.completed. Not with `in` or `after`. Default: false.
	BeforeEnd bool `json:"before_end,omitempty"`

	// The probability, in (0, 1], that the fault applies to a request.
	// Default: 1 (every request).
	Rate float64 `json:"rate,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (Simulator) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.llm_simulator",
		New: func() caddy.Module { return new(Simulator) },
	}
}

// Provision builds the simulator; sim.New applies the defaults and
// rejects out-of-range values.
func (s *Simulator) Provision(caddy.Context) error {
	cfg := sim.Config{
		Models:           s.Models,
		Seed:             s.Seed,
		ReasoningTokens:  s.ReasoningTokens,
		ContentTokens:    s.ContentTokens,
		ReasoningForm:    s.ReasoningForm,
		Echo:             s.Echo,
		ToolCalls:        s.ToolCalls,
		ContinueOverlap:  s.ContinueOverlap,
		ReasoningPattern: s.ReasoningPattern.simPattern(),
		ContentPattern:   s.ContentPattern.simPattern(),
		TTFB:             time.Duration(s.TTFB),
		Latency:          time.Duration(s.Latency),
	}
	for _, f := range s.Faults {
		cfg.Faults = append(cfg.Faults, sim.Fault{
			Kind:       f.Kind,
			Status:     f.Status,
			RetryAfter: f.RetryAfter,
			After:      f.After,
			In:         f.In,
			BeforeEnd:  f.BeforeEnd,
			Rate:       f.Rate,
		})
	}
	srv, err := sim.New(cfg)
	if err != nil {
		return fmt.Errorf("llm_simulator: %w", err)
	}
	s.server = srv
	return nil
}

func (p *SimulatorPattern) simPattern() sim.Pattern {
	if p == nil {
		return sim.Pattern{} // the default: steady at 50/s
	}
	out := sim.Pattern{
		Kind:        p.Kind,
		Rate:        sim.DefaultRate,
		Burst:       p.Burst,
		Pause:       time.Duration(p.Pause),
		BurstSpread: time.Duration(p.Spread),
	}
	if out.Kind == "" {
		out.Kind = sim.Steady
	}
	if p.Rate != nil {
		out.Rate = *p.Rate
	}
	return out
}

// Validate rejects settings that do not apply to the chosen kind of
// pattern or fault, which would otherwise be silently ignored.
func (s *Simulator) Validate() error {
	patterns := []struct {
		name string
		p    *SimulatorPattern
	}{{"reasoning_pattern", s.ReasoningPattern}, {"content_pattern", s.ContentPattern}}
	for _, np := range patterns {
		name, p := np.name, np.p
		if p == nil {
			continue
		}
		if p.Kind == sim.Clustered && p.Rate != nil {
			return fmt.Errorf("llm_simulator: %s: rate applies to steady patterns only", name)
		}
		if p.Kind != sim.Clustered && (p.Burst != 0 || p.Pause != 0 || p.Spread != 0) {
			return fmt.Errorf("llm_simulator: %s: burst, pause and spread apply to clustered patterns only", name)
		}
	}
	for i, f := range s.Faults {
		if f.Kind != sim.FaultStatus && f.Status != 0 {
			return fmt.Errorf("llm_simulator: faults[%d]: status applies to status faults only", i)
		}
		if f.Kind != sim.FaultStatus && f.Kind != sim.FaultOverloaded && f.RetryAfter != "" {
			return fmt.Errorf("llm_simulator: faults[%d]: retry_after applies to status and overloaded faults only", i)
		}
		if f.Kind != sim.FaultDrop && f.Kind != sim.FaultError && f.After != 0 {
			return fmt.Errorf("llm_simulator: faults[%d]: after applies to drop and error faults only", i)
		}
	}
	return nil
}

// Cleanup ends stalled requests, so a `stall` fault cannot hold the old
// server open forever after a reload or stop. Other in-flight responses
// finish normally.
func (s *Simulator) Cleanup() error {
	if s.server != nil {
		s.server.Close()
	}
	return nil
}

// ServeHTTP answers the request as a simulated provider. It is terminal:
// it never calls next.
func (s *Simulator) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	s.server.ServeHTTP(w, r)
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Simulator)(nil)
	_ caddy.Validator             = (*Simulator)(nil)
	_ caddy.CleanerUpper          = (*Simulator)(nil)
	_ caddyhttp.MiddlewareHandler = (*Simulator)(nil)
	_ caddyfile.Unmarshaler       = (*Simulator)(nil)
)
