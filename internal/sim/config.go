// Package sim is an LLM upstream simulator: a plain net/http handler
// that answers OpenAI chat completions, OpenAI Responses, Anthropic
// Messages and Gemini (generateContent, streamGenerateContent as SSE or
// a JSON array, countTokens) with deterministic, seeded text (the same
// in every dialect), paced like a
// real model (steady or in clustered bursts), calls a tool when the
// request forces one, and injects faults (error statuses, overload,
// stalls, dropped connections, in-band stream errors, at a count of
// events, in the middle of a phase or before the end) on demand, and
// continues an answer it is asked to continue (see ContinueMarker), so
// two simulators with one seed play both sides of a relay's
// continuation after a broken stream.
//
// It exists so an LLM relay can be run, demonstrated, tested and
// benchmarked on one machine without API keys. It has no Caddy imports;
// package simulator wraps it as the http.handlers.llm_simulator module.
package sim

import (
	"errors"
	"fmt"
	"time"
)

// Defaults applied by New to a zero Config field.
const (
	DefaultModel           = "sim-reasoner"
	DefaultSeed            = 1
	DefaultReasoningTokens = 60
	DefaultContentTokens   = 40
	DefaultRate            = 50.0
	DefaultBurst           = 20
	DefaultPause           = 800 * time.Millisecond
	DefaultBurstSpread     = 5 * time.Millisecond
)

// Pattern kinds.
const (
	Steady    = "steady"
	Clustered = "clustered"
)

// Fault kinds.
const (
	FaultStatus = "status"
	FaultStall  = "stall"
	FaultDrop   = "drop"
	FaultError  = "error"

	// FaultOverloaded is the provider being overloaded: a 529 with
	// Anthropic's overloaded_error on the Messages endpoints, a 503 in
	// OpenAI's shape on chat completions (OpenAI has no 529).
	FaultOverloaded = "overloaded"
)

// Config configures a Server. The zero value is usable: every zero field
// takes the default documented on it.
type Config struct {
	// Models are the model IDs listed by GET .../models. Any model name
	// is accepted by chat completions and echoed back. Default:
	// ["sim-reasoner"].
	Models []string

	// Seed selects the generated text and the fault draws. Default: 1.
	Seed int64

	// ReasoningTokens is the number of reasoning pieces per response
	// (reasoning_content deltas in the fields form). nil means 60; a pointer to 0 means no reasoning phase
	// (write new(0)).
	ReasoningTokens *int

	// ContentTokens is the number of content deltas per response. nil
	// means 40; a pointer to 0 means an empty answer.
	ContentTokens *int

	// ReasoningForm is how chat completions carry the reasoning:
	// "fields" (reasoning_content, as DeepSeek's API and reasoning
	// parsers send it), "tags" (inline in content between <think> tags,
	// as Qwen3 writes it) or "tags_unopened" (inline without the opening
	// tag, as DeepSeek-R1 writes it); see ReasoningTags. A request may
	// override it with the X-Sim-Reasoning-Form header. Messages and
	// Responses ignore it. Default: "fields".
	ReasoningForm string

	// Echo, if "handoff" (EchoHandoff), makes every answer on the three
	// endpoints echo the reasoning a hand-off injected into its request:
	// no reasoning, and the answer text "handoff:<where>:<reasoning>",
	// where is prefill, user or system and reasoning the text between
	// "<think>\n" and "\n</think>" there ("handoff:none:" when the request
	// carries none); see EchoText. The text is streamed in pieces of 4
	// characters, one output token each; the reasoning form still shapes
	// chat completions (an empty think block in the tags forms), and a
	// forced tool call is still made. A request may set it with the
	// X-Sim-Echo header. Default: "" (no echo).
	Echo string

	// ToolCalls is when a request gets a tool call: "forced"
	// (ToolCallsForced: only when it forces one) or "auto" (ToolCallsAuto:
	// also when it has tools and leaves the choice to the model, which
	// then calls its first tool); see the tool rule in tools.go. A
	// request may set it with the X-Sim-Tool-Calls header. Default:
	// "forced".
	ToolCalls string

	// ReasoningPattern and ContentPattern pace each phase of a stream.
	// A zero Pattern means steady at 50 tokens per second.
	ReasoningPattern Pattern
	ContentPattern   Pattern

	// TTFB is the time to first byte: how long the server waits before
	// sending the response headers and first event of a stream, or the
	// whole body of a non-streaming response. Default: 0.
	TTFB time.Duration

	// Latency is a network delay before every answer, GET .../models and
	// fault statuses included, as a far region adds to each round trip
	// (TTFB comes after it). Default: 0.
	Latency time.Duration

	// ContinueOverlap is, for a request that asks the simulator to
	// continue an answer (see ContinueMarker), the number of runes at
	// the end of the answer so far that the continuation repeats before
	// the rest, as a model that restarts a few tokens back does: what a
	// relay's splice must trim. Default: 0.
	ContinueOverlap int

	// Faults are evaluated in order for every chat completion, messages,
	// count_tokens and responses request (one counter for all);
	// the first whose Rate draw hits is applied. Default: none.
	Faults []Fault
}

// Pattern is the pacing of one phase of a stream.
type Pattern struct {
	// Kind is "steady" or "clustered". Empty means the default pattern,
	// steady at 50 tokens per second, and the other fields are ignored.
	Kind string

	// Rate is the steady rate in tokens per second. 0 means as fast as
	// possible (no waits).
	Rate float64

	// Burst is the number of tokens per clustered burst. Default: 20.
	Burst int

	// Pause is the silence between clustered bursts. Default: 800ms.
	Pause time.Duration

	// BurstSpread is the time one whole clustered burst is spread over.
	// Default: 5ms.
	BurstSpread time.Duration
}

// Fault is one kind of misbehaviour, applied to a request with
// probability Rate.
type Fault struct {
	// Kind is one of:
	//   - "status": answer Status with an OpenAI error JSON body (and a
	//     Retry-After header if RetryAfter is set), without waiting TTFB;
	//   - "stall": accept the request and never answer, not even headers,
	//     until the client goes away (or the Server is closed);
	//   - "drop": stream After data events, then abort the connection
	//     (the client sees an unexpected EOF and no [DONE]); a
	//     non-streaming request gets its connection closed with no
	//     response;
	//   - "error": stream After data events, then an in-band
	//     `data: {"error":{...}}` event, and end the response without
	//     [DONE]; a non-streaming request gets a 500 with error JSON.
	//     On Messages the event is `event: error` with Anthropic's
	//     overloaded_error, the in-band error Anthropic really sends; on
	//     Responses it is `event: error` with the error both nested
	//     under "error" (as the live API sends it, and what the SDKs
	//     raise on) and flat (as OpenAI documents it);
	//   - "overloaded": answer 529 with Anthropic's overloaded_error on
	//     the Messages endpoints and 503 with an OpenAI error on chat
	//     completions (with Retry-After if RetryAfter is set), without
	//     waiting TTFB.
	//
	// On the Messages endpoints every error body is in Anthropic's shape,
	// on the Gemini ones in Google's: "status" answers the status with its
	// google.rpc name (429 RESOURCE_EXHAUSTED, with a RetryInfo
	// retryDelay when RetryAfter is whole seconds), "overloaded" 503
	// UNAVAILABLE, and "error" sends {"error":{"code":500,"status":
	// "INTERNAL",...}} as a chunk, the SSE event or array element the
	// @google/genai SDK raises as an ApiError. A Gemini stream's end
	// event is its chunk with the finishReason, so After beyond the last
	// delta and BeforeEnd are one place there; Gemini sends a function
	// call whole, so In "tool_args" cuts right after it.
	Kind string

	// Status is the HTTP status of a "status" fault, 400-599.
	Status int

	// RetryAfter, if non-empty, is sent verbatim as the Retry-After
	// header of a "status" or "overloaded" fault, e.g. "2" or an HTTP date.
	RetryAfter string

	// After is, for "drop" and "error", the number of data events (the
	// role chunk and the token deltas) sent before the fault, which
	// trips right after the After-th (1: right after the first data
	// event, nothing else sent); 0 means before any data. A value beyond
	// the last token delta means just after it, before the finish chunk. On Messages streams the same
	// positions count: message_start (the role chunk's twin) and each
	// thinking_delta, text_delta and input_json_delta; ping, block
	// start and stop and signature_delta do not count. On Responses
	// streams: response.created and each reasoning_summary_text,
	// output_text and function_call_arguments delta.
	After int

	// In, for "drop" and "error", puts the fault in the middle of one
	// phase of a stream instead of after After events: "reasoning" (the
	// reasoning, thinking or summary deltas), "answer" (the text deltas)
	// or "tool_args" (a tool call's argument deltas). The fault trips
	// right after m of the phase's k deltas, m drawn by (seed, request)
	// between k/4 and 3k/4 (at least 1, below k when k > 1). A request
	// whose answer has no such phase (no reasoning asked for, a tool
	// call instead of text, a continuation, ...) gets no fault. After
	// must then be 0. Default: "" (After counts).
	In string

	// BeforeEnd, for "drop" and "error", trips the fault after every
	// event but the stream's last: Chat after the finish chunk (and
	// the usage chunk) instead of [DONE]; Messages after message_delta
	// instead of message_stop; Responses instead of response.completed.
	// In and After must then be unset.
	BeforeEnd bool

	// Rate is the probability, 0 < Rate <= 1, that the fault applies to
	// a request. 0 means 1 (always).
	Rate float64
}

// withDefaults returns a copy of c with zero fields set to defaults.
func (c Config) withDefaults() Config {
	if len(c.Models) == 0 {
		c.Models = []string{DefaultModel}
	} else {
		c.Models = append([]string(nil), c.Models...)
	}
	if c.Seed == 0 {
		c.Seed = DefaultSeed
	}
	if c.ReasoningTokens == nil {
		c.ReasoningTokens = new(DefaultReasoningTokens)
	}
	if c.ContentTokens == nil {
		c.ContentTokens = new(DefaultContentTokens)
	}
	if c.ReasoningForm == "" {
		c.ReasoningForm = ReasoningFields
	}
	c.ReasoningPattern = c.ReasoningPattern.withDefaults()
	c.ContentPattern = c.ContentPattern.withDefaults()
	c.Faults = append([]Fault(nil), c.Faults...)
	for i := range c.Faults {
		if c.Faults[i].Rate == 0 {
			c.Faults[i].Rate = 1
		}
	}
	return c
}

func (p Pattern) withDefaults() Pattern {
	switch p.Kind {
	case "":
		return Pattern{Kind: Steady, Rate: DefaultRate}
	case Clustered:
		if p.Burst == 0 {
			p.Burst = DefaultBurst
		}
		if p.Pause == 0 {
			p.Pause = DefaultPause
		}
		if p.BurstSpread == 0 {
			p.BurstSpread = DefaultBurstSpread
		}
	}
	return p
}

// validate checks a Config that already has its defaults.
func (c Config) validate() error {
	var errs []error
	for i, m := range c.Models {
		if m == "" {
			errs = append(errs, fmt.Errorf("models[%d]: empty model name", i))
		}
	}
	if *c.ReasoningTokens < 0 {
		errs = append(errs, fmt.Errorf("reasoning tokens: must be >= 0, got %d", *c.ReasoningTokens))
	}
	if *c.ContentTokens < 0 {
		errs = append(errs, fmt.Errorf("content tokens: must be >= 0, got %d", *c.ContentTokens))
	}
	if c.Latency < 0 {
		errs = append(errs, fmt.Errorf("latency: must be >= 0, got %v", c.Latency))
	}
	if c.ContinueOverlap < 0 {
		errs = append(errs, fmt.Errorf("continue overlap: must be >= 0 runes, got %d", c.ContinueOverlap))
	}
	if c.TTFB < 0 {
		errs = append(errs, fmt.Errorf("ttfb: must be >= 0, got %v", c.TTFB))
	}
	if err := validateForm(c.ReasoningForm); err != nil {
		errs = append(errs, fmt.Errorf("reasoning form: %w", err))
	}
	if err := validateToolCalls(c.ToolCalls); err != nil {
		errs = append(errs, fmt.Errorf("tool calls: %w", err))
	}
	if err := validateEcho(c.Echo); err != nil {
		errs = append(errs, fmt.Errorf("echo: %w", err))
	}
	if err := c.ReasoningPattern.validate(); err != nil {
		errs = append(errs, fmt.Errorf("reasoning pattern: %w", err))
	}
	if err := c.ContentPattern.validate(); err != nil {
		errs = append(errs, fmt.Errorf("content pattern: %w", err))
	}
	for i, f := range c.Faults {
		if err := f.validate(); err != nil {
			errs = append(errs, fmt.Errorf("faults[%d]: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

func (p Pattern) validate() error {
	switch p.Kind {
	case Steady:
		if p.Rate < 0 {
			return fmt.Errorf("steady rate must be >= 0 tokens per second, got %v", p.Rate)
		}
	case Clustered:
		if p.Burst < 0 {
			return fmt.Errorf("clustered burst must be > 0 tokens, got %d", p.Burst)
		}
		if p.Pause < 0 || p.BurstSpread < 0 {
			return fmt.Errorf("clustered pause and spread must be >= 0, got %v and %v", p.Pause, p.BurstSpread)
		}
	default:
		return fmt.Errorf("unknown kind %q (want %q or %q)", p.Kind, Steady, Clustered)
	}
	return nil
}

func (f Fault) validate() error {
	if f.Rate < 0 || f.Rate > 1 {
		return fmt.Errorf("rate must be a probability in (0, 1], got %v", f.Rate)
	}
	if f.Kind != FaultDrop && f.Kind != FaultError && (f.In != "" || f.BeforeEnd) {
		return fmt.Errorf("%s: in and before_end apply to drop and error faults only", f.Kind)
	}
	switch f.Kind {
	case FaultStatus:
		if f.Status < 400 || f.Status > 599 {
			return fmt.Errorf("status must be an HTTP error status 400-599, got %d", f.Status)
		}
	case FaultDrop, FaultError:
		if f.After < 0 {
			return fmt.Errorf("%s: after must be >= 0 events, got %d", f.Kind, f.After)
		}
		return f.validatePlace()
	case FaultStall, FaultOverloaded:
	default:
		return fmt.Errorf("unknown kind %q (want %q, %q, %q, %q or %q)", f.Kind, FaultStatus, FaultStall, FaultDrop, FaultError, FaultOverloaded)
	}
	return nil
}
