package chaos

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// Class is what a client got, as an SDK user would judge it.
type Class int

const (
	// Complete: a well-formed answer; a stream that ended with [DONE]
	// (or, on /v1/responses, with response.completed).
	Complete Class = iota
	// Continued: a stream that broke after the commit point and that the
	// relay continued on another target (it says so in a
	// `: relay-continued` comment), complete as Complete is.
	Continued
	// ExplicitError: an HTTP error with an OpenAI error object, or an
	// in-band error event on a stream: every SDK raises it.
	ExplicitError
	// Abort: the connection broke after the response had started (the
	// relay's documented abort of a broken non-stream body, as
	// reverse_proxy does), or before it with no reload nearby. SDKs raise
	// a transport error.
	Abort
	// ReloadFailure: the connection failed (EOF, reset, refused) before
	// any response byte while a config reload was under way.
	ReloadFailure
	// Hang: still open past the client's deadline.
	Hang
	// Truncation: looks finished to a client but is not: a 200 stream
	// that ended cleanly without [DONE] and without an error event, or a
	// non-stream 200 whose body is not complete JSON.
	Truncation
	// Malformed: neither an answer nor an explicit error, though not
	// silent either: a 3xx passed through, an error status without an
	// error object, a data event that is not JSON.
	Malformed

	NumClasses = int(Malformed) + 1
)

var classNames = [NumClasses]string{"complete", "continued", "error", "abort", "reload-fail", "HANG", "TRUNCATED", "malformed"}

func (c Class) String() string {
	if c < 0 || int(c) >= NumClasses {
		return "unknown"
	}
	return classNames[c]
}

// Observation is what a client saw of one request.
type Observation struct {
	Stream    bool
	Responses bool // a /v1/responses request (its streams end without [DONE])

	// Hung: the client's own deadline ran out (HangPhase says which).
	Hung      bool
	HangPhase string

	// PreResponseErr: the request failed before any response byte.
	PreResponseErr bool
	ErrText        string
	// ReloadOverlap: a config reload ran while the request waited for
	// its response.
	ReloadOverlap bool

	Status      int
	ContentType string
	RetryAfter  string
	Location    string

	// Body is the response body as read (non-stream answers, and error
	// answers); Events are the LF-parsed events of a 2xx stream.
	Body   []byte
	Events []Event
	// Seams counts the stream's `: relay-continued` comments: the
	// places where the relay continued it on another target.
	Seams int
	// Dialect, when set, has a 2xx stream checked as that dialect's
	// clients read it (CheckStream): a stream of another shape is
	// malformed; Classify sets Text to the answer's text.
	Dialect Dialect
	Text    string
	// ReadErr: the body broke (not by the client's deadline).
	ReadErr bool
}

// Result is a classified observation.
type Result struct {
	Class  Class
	Detail string // why, in a few words
}

// Classify sorts one observation into its class.
func Classify(o *Observation) Result {
	switch {
	case o.Hung:
		return Result{Hang, "open past the client deadline (" + o.HangPhase + ")"}
	case o.PreResponseErr && o.ReloadOverlap:
		return Result{ReloadFailure, "before any response byte, during a reload: " + o.ErrText}
	case o.PreResponseErr:
		return Result{Abort, "before any response byte: " + o.ErrText}
	case o.Status < 200:
		return Result{Malformed, "informational status"}
	case o.Status >= 300 && o.Status < 400:
		d := "3xx passed through"
		if o.Location != "" {
			d += " with its Location"
		}
		return Result{Malformed, d}
	case o.Status >= 400:
		if o.ReadErr {
			return Result{Abort, "error body broke"}
		}
		if hasErrorObject(o.Body) {
			return Result{ExplicitError, "error JSON"}
		}
		return Result{Malformed, "error status without an error object"}
	case o.Stream:
		return classifyStream(o)
	}
	return classifyBody(o)
}

// classifyStream judges a 2xx stream (classifyStreamEnd), then, with a
// Dialect, its shape; a complete stream with a seam is Continued.
func classifyStream(o *Observation) Result {
	r := classifyStreamEnd(o)
	if o.Dialect != "" && (r.Class == Complete || r.Class == ExplicitError) {
		text, problem := CheckStream(o.Dialect, o.Events, r.Class == Complete)
		o.Text = text
		if problem != "" {
			return Result{Malformed, "not a well-formed " + string(o.Dialect) + " stream: " + problem}
		}
	}
	if r.Class == Complete && o.Seams > 0 {
		r.Class, r.Detail = Continued, r.Detail+", continued at "+strconv.Itoa(o.Seams)+" seam(s)"
	}
	return r
}

// classifyStreamEnd judges a 2xx answer to a stream request by its LF-parsed
// events, as an SDK would: the first [DONE] (or response.completed) ends
// it well, an error event raises, a data event that is not JSON raises a
// decode error, and anything else that ends is a truncation.
func classifyStreamEnd(o *Observation) Result {
	malformed, completed, end := "", false, "response.completed"
	for _, ev := range o.Events {
		if !ev.HasData {
			if ev.Type == "error" {
				return Result{ExplicitError, "in-band error event"}
			}
			continue
		}
		if bytes.Equal(bytes.TrimSpace(ev.Data), []byte("[DONE]")) {
			if malformed != "" {
				return Result{Malformed, malformed}
			}
			return Result{Complete, "[DONE]"}
		}
		if ev.Type == "error" || hasErrorObject(ev.Data) {
			return Result{ExplicitError, "in-band error event"}
		}
		if !json.Valid(ev.Data) {
			if malformed == "" {
				malformed = "a data event that is not JSON: " + strconv.Quote(short(string(ev.Data)))
			}
			continue
		}
		if o.Dialect == DialectMessages && typeOf(ev) == "message_stop" {
			// Anthropic's streams end with message_stop, no [DONE].
			completed, end = true, "message_stop"
		}
		if o.Responses {
			// No [DONE] ends a Responses stream: an SDK reads on to the
			// end, so an error after response.completed still raises.
			switch typ := responseEventType(ev); typ {
			case "response.completed":
				completed = true
			case "response.failed", "response.incomplete", "error":
				return Result{ExplicitError, "in-band " + typ}
			}
		}
	}
	switch {
	case malformed != "":
		return Result{Malformed, malformed}
	case completed:
		// A break after response.completed (message_stop) loses nothing.
		return Result{Complete, end}
	case o.ReadErr:
		return Result{Abort, "stream broke without an error event"}
	}
	if !strings.HasPrefix(strings.ToLower(o.ContentType), "text/event-stream") {
		return Result{Truncation, "200 non-SSE answer to a stream request (" + describeType(o.ContentType) + "): 0 SDK chunks, no error"}
	}
	if len(o.Events) == 0 {
		return Result{Truncation, "stream of 0 LF-parsable events (bare-CR lines?) ended cleanly"}
	}
	return Result{Truncation, "stream ended cleanly without [DONE] and without an error event"}
}

// classifyBody judges a 2xx non-stream answer: a JSON object is an
// answer, one with an error object an explicit error; anything else
// closed cleanly is a truncation a client cannot tell from an answer.
func classifyBody(o *Observation) Result {
	if o.ReadErr {
		return Result{Abort, "body broke after the response started"}
	}
	b := bytes.TrimSpace(o.Body)
	if len(b) == 0 || b[0] != '{' || !json.Valid(b) {
		return Result{Truncation, "200 body is not complete JSON, yet the connection closed cleanly"}
	}
	if hasErrorObject(b) {
		return Result{ExplicitError, "200 with an error object"}
	}
	return Result{Complete, "JSON answer"}
}

func describeType(ct string) string {
	if ct == "" {
		return "no Content-Type"
	}
	return ct
}

// hasErrorObject reports whether b is a JSON object with a non-null
// top-level "error" (OpenAI's shape) or "object":"error" (older vLLM).
func hasErrorObject(b []byte) bool {
	var probe struct {
		Error  json.RawMessage `json:"error"`
		Object string          `json:"object"`
	}
	if json.Unmarshal(b, &probe) != nil {
		return false
	}
	return (len(probe.Error) > 0 && string(probe.Error) != "null") || probe.Object == "error"
}

// responseEventType is a Responses API event's type: its `event:` field,
// else its JSON "type".
func responseEventType(ev Event) string {
	if ev.Type != "" {
		return ev.Type
	}
	var probe struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(ev.Data, &probe)
	return probe.Type
}
