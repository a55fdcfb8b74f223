package llmrelay

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

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
	alias   string
	judge   shadow.Judge // the model's SLO and warn_similarity (shadowverdict.go)
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
func (h *Relay) startShadow(sr *shadowRuntime, r *http.Request, body *requestBody, ep endpoint) chan<- shadowPrimary {
	life := h.lifetime()
	if sr == nil || life.Err() != nil || !shadow.Sample(sr.percent, nil) {
		return nil
	}
	primary := make(chan shadowPrimary, 1)
	hdr := r.Header.Clone()
	query := r.URL.RawQuery
	// The client's answer's shape: a request the relay streamed only to
	// assemble its answer was answered whole.
	stream := body.clientStream()
	h.inflight.enter()         // the copy uses the config's transport
	release := body.buf.hold() // the copy reads the body after the handler is done
	parent := shadowParent(r)  // the client's request's, for the copy's span (tracing.go)
	started := sr.runner.GoThen(func() func() {
		ctx, cancel := context.WithTimeout(life, shadowTimeout)
		ctx, span := startShadowSpan(ctx, parent, sr.target, body, ep)
		res := shadowCall(ctx, sr.target, hdr, query, body, ep)
		endShadowSpan(span, res)
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
			var p shadow.Primary
			wait := time.NewTimer(shadowTimeout)
			defer wait.Stop()
			select {
			case pa := <-primary:
				p = pa.read(stream, ep.dialect, res.OK)
			case <-life.Done(): // the copy is complete: record it uncompared
			case <-wait.C:
			}
			h.logShadowCrossings(sr, sr.runner.RecordWith(res, p, sr.judge))
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
func shadowCall(ctx context.Context, t *target, hdr http.Header, query string, body *requestBody, ep endpoint) shadow.Result {
	start := time.Now()
	var res shadow.Result
	x, ok := exchangeFor(ep, t.up, t.think, "")
	x.request = body.raw
	if !ok {
		res.Err = "the shadow upstream speaks " + t.up.api + ", which has no /v1/" + ep.rest
		return res
	}
	payload, err := body.forTarget(t, x)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	req, err := t.up.newRequest(ctx, http.MethodPost, t.up.url(x.restFor(cmp.Or(t.model, body.model), body.stream), x.query(query)), hdr, payload)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	propagateTrace(ctx, t.up, req.Header)
	resp, err := t.up.transport.RoundTrip(req)
	if err != nil {
		res.Err = unwrapURLError(err).Error()
		res.Duration = time.Since(start)
		return res
	}
	defer resp.Body.Close()
	res.Status = resp.StatusCode
	var a shadowAnswer
	if isEventStream(resp.Header) {
		var tl pace.Timeline
		a = readTimedAnswer(io.LimitReader(resp.Body, 16<<20), true, x, func() {
			if res.TTFT == 0 {
				res.TTFT = time.Since(start)
			}
		}, func(data []byte) { markReasoning(&tl, data, time.Since(start)) })
		res.ClusterRate, res.ClusterKnown = tl.ClusterRate(false)
	} else {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxCapture))
		res.TTFT = time.Since(start)
		a = readUpstreamAnswer(bytes.NewReader(b), false, x, nil)
	}
	res.Duration = time.Since(start)
	res.OK = resp.StatusCode < 300 && a.saw
	res.Text = a.text
	res.CompletionTokens, res.ReasoningTokens = a.completion, a.reasoning
	return res
}

// shadowAnswer is what the comparison reads of an answer.
type shadowAnswer struct {
	text                  string // the content, at most maxCapture bytes
	completion, reasoning int    // from its usage
	saw                   bool   // it was an answer: a chunk, or a completion with a choice
}

// readAnswer reads an answer in dialect d, a stream or a whole body, as
// Chat Completions: translated by d's codec (ToChatStream,
// ToChatResponse) and put together by a chat.Assembler, the same whatever
// the dialect. onChunk is called at each chunk of a stream.
func readAnswer(r io.Reader, stream bool, d dialect, onChunk func()) shadowAnswer {
	return readUpstreamAnswer(r, stream, exchange{upstream: d}, onChunk)
}

// readUpstreamAnswer is readAnswer for an upstream's answer to x: in
// x.upstream's dialect, its inline reasoning (x.think) moved out of the
// content as an attempt's is, so that the comparison reads the answer
// without it. Reasoning its usage does not count is estimated as the
// relay's own accounting estimates it (withReasoning).
func readUpstreamAnswer(r io.Reader, stream bool, x exchange, onChunk func()) shadowAnswer {
	return readTimedAnswer(r, stream, x, onChunk, nil)
}

// readTimedAnswer is readUpstreamAnswer that also gives each chunk of a
// stream, as Chat Completions, to onData (nil: none).
func readTimedAnswer(r io.Reader, stream bool, x exchange, onChunk func(), onData func([]byte)) shadowAnswer {
	d := x.upstream
	var asm chat.Assembler
	var a shadowAnswer
	if stream {
		src := d.codec().ToChatStream(x.untagStream(sse.NewReader(r, 0)), chat.Options{IncludeUsage: true})
		for {
			ev, err := src.Next()
			if err != nil {
				break // the end, a break, or an event that does not translate: what came before counts
			}
			if ev.HasData && !ev.IsDone() {
				onChunk()
				if onData != nil {
					onData(ev.Data)
				}
				a.saw = asm.Add(ev.Data, 0, false) || a.saw
			}
		}
	} else if b, err := io.ReadAll(r); err == nil {
		if out, err := d.codec().ToChatResponse(x.untagAnswer(http.StatusOK, b), chat.Options{}); err == nil {
			asm.AddCompletion(out)
		}
	}
	c := asm.Completion(0, false)
	if !stream {
		a.saw = len(c.Choices) > 0
	}
	if len(c.Choices) > 0 && c.Choices[0].Message.Content != nil {
		a.text = *c.Choices[0].Message.Content
		if len(a.text) > maxCapture {
			a.text = strings.ToValidUTF8(a.text[:maxCapture], "")
		}
	}
	var u usageJSON
	if json.Unmarshal(c.Usage, &u) == nil {
		a.completion, a.reasoning = u.CompletionTokens, u.CompletionTokensDetails.ReasoningTokens
	}
	if len(c.Choices) > 0 {
		m := c.Choices[0].Message
		runes := 0
		for _, s := range []*string{m.ReasoningContent, m.Reasoning} {
			if s != nil {
				runes += utf8.RuneCountInString(*s)
			}
		}
		a.reasoning = withReasoning(usage.Usage{Completion: a.completion, Reasoning: a.reasoning}, 0, runes).Reasoning
	}
	return a
}

// usageJSON is the part of a Chat usage object the comparison reads.
type usageJSON struct {
	CompletionTokens        int `json:"completion_tokens"`
	CompletionTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
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
