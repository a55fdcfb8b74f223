package llmrelay

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/dialect/anthropic"
	"github.com/llmrelay/caddy-llm-relay/internal/dialect/chat"
	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/shadow"
	"github.com/llmrelay/caddy-llm-relay/internal/sse"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// shadowRuntime is a route's compiled shadow.
type shadowRuntime struct {
	runner  *shadow.Runner // shared across reloads
	percent float64
	target  *target
}

// shadowTimeout bounds one shadow copy, so a hanging shadow target cannot
// hold a slot for ever. A copy also ends when its config is unloaded.
const shadowTimeout = 5 * time.Minute

// maxCapture is how much of the client's answer is kept to compare with a
// shadow's, and how much of a shadow's body is read.
const maxCapture = 256 << 10

// startShadow sends a sampled copy of the request to the route's shadow
// target in the background and returns a channel for the client's answer
// text (to compare with), or nil when no copy was sent. The copy never
// delays or changes the client's response: it runs on its own goroutine
// and context, and a copy beyond max_concurrent is dropped and counted.
// The copy belongs to the config, not to the request: it is cancelled when
// the config is unloaded (a reload), and then not recorded, since the
// shadow target did not fail.
func (h *Relay) startShadow(sr *shadowRuntime, r *http.Request, body *requestBody, rest string, client dialect) chan<- []byte {
	life := h.lifetime()
	if sr == nil || life.Err() != nil || !shadow.Sample(sr.percent, nil) {
		return nil
	}
	primary := make(chan []byte, 1)
	hdr := r.Header.Clone()
	query := r.URL.RawQuery
	// The client's answer's shape: a request the relay streamed only to
	// assemble its answer was answered whole.
	stream := body.clientStream()
	h.inflight.enter()         // the copy uses the config's transport
	release := body.buf.hold() // the copy reads the body after the handler is done
	started := sr.runner.GoThen(func() func() {
		ctx, cancel := context.WithTimeout(life, shadowTimeout)
		res := shadowCall(ctx, sr.target, hdr, query, body, rest, client)
		cancel()
		release()
		h.inflight.leave()
		if life.Err() != nil {
			return nil // unloaded mid-copy: abandoned, not failed
		}
		// The comparison waits for the client's answer without holding a
		// max_concurrent slot (the slot bounds calls to the shadow
		// target), but still counted by the runner.
		return func() {
			var text string
			wait := time.NewTimer(shadowTimeout)
			defer wait.Stop()
			select {
			case b := <-primary:
				if res.OK {
					text = answerOf(b, stream, client)
				}
			case <-life.Done(): // the copy is complete: record it uncompared
			case <-wait.C:
			}
			sr.runner.Record(res, text)
		}
	})
	if !started {
		release()
		h.inflight.leave()
		return nil
	}
	return primary
}

// shadowCall sends one shadow copy and reads the whole answer. The copy
// goes in the shadow's dialect (translated like an attempt's request); its
// answer is read as Chat Completions (translated back if need be), the
// form the comparison reads.
func shadowCall(ctx context.Context, t *target, hdr http.Header, query string, body *requestBody, rest string, client dialect) shadow.Result {
	start := time.Now()
	var res shadow.Result
	x, ok := exchangeFor(client, rest, t.up, "")
	x.request = body.raw
	if !ok {
		res.Err = "the shadow upstream speaks " + t.up.api + ", which has no /v1/" + rest
		return res
	}
	payload, err := body.forTarget(t, x)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	req, err := t.up.newRequest(ctx, http.MethodPost, t.up.url(x.rest, x.query(query)), hdr, payload)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	resp, err := t.up.transport.RoundTrip(req)
	if err != nil {
		res.Err = unwrapURLError(err).Error()
		res.Duration = time.Since(start)
		return res
	}
	defer resp.Body.Close()
	res.Status = resp.StatusCode
	var text answerText
	if isEventStream(resp.Header) {
		text.addStream(io.LimitReader(resp.Body, 16<<20), x.upstream, func() {
			if res.TTFT == 0 {
				res.TTFT = time.Since(start)
			}
		})
	} else {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxCapture))
		res.TTFT = time.Since(start)
		text.addWhole(b, x.upstream)
	}
	res.Duration = time.Since(start)
	res.OK = resp.StatusCode < 300 && text.sawAnswer
	res.Text = text.b.String()
	res.CompletionTokens, res.ReasoningTokens = text.completion, text.reasoning
	return res
}

// addStream reads a whole stream in dialect d, as Chat Completions chunks;
// onData is called at each chunk.
func (a *answerText) addStream(r io.Reader, d dialect, onData func()) {
	var src pace.Source = sse.NewReader(r, 0)
	if d == dialectResponses {
		for {
			ev, err := src.Next()
			if err != nil {
				return
			}
			if ev.HasData {
				onData()
				a.addResponsesEvent(ev.Data)
			}
		}
	}
	if d == dialectMessages {
		src = anthropic.ToChatStream(src, chat.Options{IncludeUsage: true})
	}
	for {
		ev, err := src.Next()
		if err != nil {
			return
		}
		if !ev.HasData || ev.IsDone() {
			continue
		}
		onData()
		a.addChunk(ev.Data)
	}
}

// addWhole reads a whole (non-stream) answer in dialect d.
func (a *answerText) addWhole(b []byte, d dialect) {
	if d == dialectResponses {
		a.addResponse(b)
		return
	}
	a.addMessage(chatAnswer(b, d))
}

// responsesUsage is the usage of a Responses answer.
type responsesUsage struct {
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

// responseJSON is the part of a Responses response object the comparison
// reads: its output text and usage.
type responseJSON struct {
	Output []struct {
		Type    string `json:"type"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"output"`
	Usage *responsesUsage `json:"usage"`
}

// addResponse reads a whole Responses response object.
func (a *answerText) addResponse(b []byte) {
	var r responseJSON
	if json.Unmarshal(b, &r) != nil {
		return
	}
	a.sawAnswer = true
	for _, it := range r.Output {
		for _, c := range it.Content {
			if it.Type == "message" && c.Type == "output_text" && a.b.Len() < maxCapture {
				a.b.WriteString(c.Text)
			}
		}
	}
	a.responsesUsage(r.Usage)
}

// addResponsesEvent reads one Responses stream event: text deltas, and the
// usage of the final response.
func (a *answerText) addResponsesEvent(data []byte) {
	var ev struct {
		Type     string        `json:"type"`
		Delta    string        `json:"delta"`
		Response *responseJSON `json:"response"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return
	}
	a.sawAnswer = true
	switch ev.Type {
	case "response.output_text.delta":
		if a.b.Len() < maxCapture {
			a.b.WriteString(ev.Delta)
		}
	case "response.completed", "response.incomplete":
		if ev.Response != nil {
			a.responsesUsage(ev.Response.Usage)
		}
	}
}

func (a *answerText) responsesUsage(u *responsesUsage) {
	if u != nil {
		a.completion, a.reasoning = u.OutputTokens, u.OutputTokensDetails.ReasoningTokens
	}
}

// chatAnswer is a whole answer in dialect d as a chat.completion (or as it
// was, when it does not translate).
func chatAnswer(b []byte, d dialect) []byte {
	if d != dialectMessages {
		return b
	}
	if out, err := anthropic.ToChatResponse(b, chat.Options{}); err == nil {
		return out
	}
	return b
}

// answerText collects the answer text and usage of a chat completion, from
// stream chunks or a whole response.
type answerText struct {
	b                     strings.Builder
	completion, reasoning int
	sawAnswer             bool
}

type usageJSON struct {
	CompletionTokens        int `json:"completion_tokens"`
	CompletionTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func (a *answerText) addChunk(data []byte) {
	var c struct {
		Choices []struct {
			Delta struct {
				Content *string `json:"content"`
			} `json:"delta"`
		} `json:"choices"`
		Usage *usageJSON `json:"usage"`
	}
	if json.Unmarshal(data, &c) != nil {
		return
	}
	a.sawAnswer = true
	for _, ch := range c.Choices {
		if ch.Delta.Content != nil && a.b.Len() < maxCapture {
			a.b.WriteString(*ch.Delta.Content)
		}
	}
	a.usage(c.Usage)
}

func (a *answerText) addMessage(b []byte) {
	var c struct {
		Choices []struct {
			Message struct {
				Content *string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Usage *usageJSON `json:"usage"`
	}
	if json.Unmarshal(b, &c) != nil {
		return
	}
	a.sawAnswer = len(c.Choices) > 0
	if len(c.Choices) > 0 && c.Choices[0].Message.Content != nil {
		a.b.WriteString(*c.Choices[0].Message.Content)
	}
	a.usage(c.Usage)
}

func (a *answerText) usage(u *usageJSON) {
	if u != nil {
		a.completion, a.reasoning = u.CompletionTokens, u.CompletionTokensDetails.ReasoningTokens
	}
}

// captureWriter keeps the first bytes of the client's answer (for the
// shadow comparison and a non-stream answer's usage) and its last ones
// (where the usage of an answer longer than that is).
type captureWriter struct {
	http.ResponseWriter
	buf  bytes.Buffer
	tail []byte
}

const captureTail = 8 << 10

func (cw *captureWriter) Write(b []byte) (int, error) {
	if room := maxCapture - cw.buf.Len(); room > 0 {
		cw.buf.Write(b[:min(len(b), room)])
	} else {
		cw.tail = append(cw.tail, b...)
		if len(cw.tail) > 2*captureTail {
			cw.tail = append(cw.tail[:0], cw.tail[len(cw.tail)-captureTail:]...)
		}
	}
	return cw.ResponseWriter.Write(b)
}

// usage returns the usage object of a captured non-stream answer.
func (cw *captureWriter) usage() json.RawMessage {
	if raw, ok := usage.Member(cw.buf.Bytes()); ok {
		return raw
	}
	var b struct {
		Usage json.RawMessage `json:"usage"`
	}
	if json.Unmarshal(cw.buf.Bytes(), &b) == nil {
		return b.Usage
	}
	// Longer than the capture: the usage object is near the end.
	i := bytes.LastIndex(cw.tail, []byte(`"usage"`))
	if i < 0 {
		return nil
	}
	dec := json.NewDecoder(io.MultiReader(strings.NewReader("{"), bytes.NewReader(cw.tail[i:])))
	if dec.Decode(&b) != nil {
		return nil
	}
	return b.Usage
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (cw *captureWriter) Unwrap() http.ResponseWriter { return cw.ResponseWriter }

// answerOf extracts the answer text from what the client got, in the
// client's dialect.
func answerOf(captured []byte, stream bool, d dialect) string {
	var a answerText
	if !stream {
		a.addWhole(captured, d)
		return a.b.String()
	}
	a.addStream(bytes.NewReader(captured), d, func() {})
	return a.b.String()
}
