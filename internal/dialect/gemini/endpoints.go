package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// The bodies of the endpoints besides generateContent, for the relay to
// serve a Gemini client.

// CountTokensRequest is the generateContent request a countTokens body
// asks about: countTokens takes either {"contents":[…]} or
// {"generateContentRequest":{"model","contents",…}} (with tools, system
// instruction and config), and either reads as a generateContent body
// (ToChatRequest translates it, for the relay's estimate).
func CountTokensRequest(body []byte) ([]byte, error) {
	var r struct {
		GenerateContentRequest json.RawMessage `json:"generateContentRequest"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, invalid("", "the body is not a valid Gemini countTokens request: %v", err)
	}
	if !isNullOrAbsent(r.GenerateContentRequest) {
		if !isObject(r.GenerateContentRequest) {
			return nil, invalid("generateContentRequest", "want an object")
		}
		return r.GenerateContentRequest, nil
	}
	return body, nil
}

// CountTokensAnswer is countTokens' answer: {"totalTokens":n}.
func CountTokensAnswer(total int) []byte {
	return marshal(struct {
		TotalTokens int `json:"totalTokens"`
	}{total})
}

// ModelsList is the answer of GET models: each name (an alias the
// relay serves) as a model that generates content, streams and counts
// tokens. The SDKs and Gemini CLI read name and
// supportedGenerationMethods.
func ModelsList(names []string) []byte {
	type model struct {
		Name                       string   `json:"name"`
		DisplayName                string   `json:"displayName"`
		SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
	}
	out := struct {
		Models []model `json:"models"`
	}{Models: []model{}}
	for _, n := range names {
		out.Models = append(out.Models, model{Name: "models/" + strings.TrimPrefix(n, "models/"), DisplayName: n,
			SupportedGenerationMethods: []string{GenerateMethod, StreamMethod, CountTokensMethod}})
	}
	return marshal(out)
}

// JSONArray turns a Gemini SSE stream (FromChatStream's) into the form
// streamGenerateContent takes without alt=sse: one JSON array, each
// chunk an element, written as it comes ("[" before the first, ",\r\n"
// before the others, "]" after the last, at the end of src). The events
// it yields are raw bytes, not SSE blocks: Raw is what to write, Data the
// chunk. An in-band error (StreamError) is an element too, then the
// array ends. src's errors other than io.EOF are returned as they are
// (no "]": the client sees the array cut), and sse.ErrPending without
// ending anything. An event is valid until the next call to Next, as a
// Reader's. The returned Source forwards BeforeRead to src.
func JSONArray(src sse.Source) sse.Source { return &arrayStream{src: src} }

type arrayStream struct {
	src   sse.Source
	n     int  // elements written
	ended bool // "]" is out
	err   error
	buf   []byte
}

func (a *arrayStream) BeforeRead(f func()) { sse.ForwardBeforeRead(a.src, f) }

func (a *arrayStream) Next() (sse.Event, error) {
	if a.err != nil {
		return sse.Event{}, a.err
	}
	for {
		ev, err := a.src.Next()
		if errors.Is(err, io.EOF) {
			a.err = io.EOF
			if a.ended {
				return sse.Event{}, io.EOF
			}
			a.ended = true
			end := []byte("]")
			if a.n == 0 {
				end = []byte("[]")
			}
			return sse.Event{Raw: end, Retry: -1}, nil
		}
		if err == sse.ErrPending {
			return sse.Event{}, err // a fed stream's "nothing more for now": not the end
		}
		if err != nil {
			a.err = err
			return sse.Event{}, err
		}
		data := bytes.TrimSpace(ev.Data)
		if !ev.HasData || len(data) == 0 {
			continue
		}
		b := a.buf[:0]
		if a.n == 0 {
			b = append(b, '[')
		} else {
			b = append(b, ",\r\n"...)
		}
		start := len(b)
		b = append(b, data...)
		a.n++
		a.buf = b
		// Valid until the next call, which reuses a.buf.
		return sse.Event{Raw: b[:len(b):len(b)], Type: ev.Type, Data: b[start:len(b):len(b)], HasData: true, Retry: -1}, nil
	}
}
