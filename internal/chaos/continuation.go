package chaos

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The continuation behaviours (issue 30): every one of them writes the
// same deterministic answer, ContAnswer, continuing from the answer so
// far when the request carries one (a trailing assistant turn, as a
// prefill or followed by the relay's instruction to continue), so a
// stream the relay continued on another target must show the client
// exactly ContAnswer. The faulty ones break their stream at a random
// point: after 0 to all of their pieces, or not at all; and never twice
// in a row for one target (the request's path and model), so that the
// relay's passive health (3 consecutive failures eject a target, which
// then goes last in its chain) keeps them where the chain puts them. A
// model may carry a tag after "@" (cont-drop@x): the behaviour is the
// part before it, and each tag is a target of its own.
const (
	ContDrop  Behaviour = "cont-drop"  // stream: the connection drops at a random point
	ContError Behaviour = "cont-error" // stream: an in-band server error event at a random point
	ContStall Behaviour = "cont-stall" // stream: silence (past stream_idle_timeout) at a random point
	ContGood  Behaviour = "cont-good"  // the answer (or its rest), whole
	// ContFail: a 200 stream whose only event is a server error event, so
	// a continuation asked of it fails after its stream was read.
	ContFail Behaviour = "cont-fail"
)

// contWords is how many words ContAnswer has.
const contWords = 24

// ContAnswer is the continuation behaviours' answer: "c0 c1 … c23."
// Its pieces (the stream's content deltas) are "c0", " c1", …, " c23.":
// a sent prefix never ends in whitespace, so a prefill's right-trim
// leaves it as it was.
var ContAnswer = func() string {
	var b strings.Builder
	for i := range contWords {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("c" + strconv.Itoa(i))
	}
	return b.String() + "."
}()

// ContMismatch is what a continuation behaviour answers when the answer
// so far it was sent is not a prefix of ContAnswer: text no client may
// see.
const ContMismatch = " [the answer so far was not a prefix of the answer]"

// isCont reports whether b is a continuation behaviour.
func isCont(b Behaviour) bool {
	return b == ContDrop || b == ContError || b == ContStall || b == ContGood || b == ContFail
}

// contPieces is the rest of ContAnswer after the answer so far in a
// Chat request body, in pieces that start at spaces.
func contPieces(body []byte) []string {
	rest := ContAnswer
	if sofar := answerSoFar(body); sofar != "" {
		if !strings.HasPrefix(ContAnswer, sofar) {
			return []string{ContMismatch}
		}
		rest = ContAnswer[len(sofar):]
	}
	var out []string
	for rest != "" {
		i := strings.IndexByte(rest[1:], ' ')
		if i < 0 {
			out = append(out, rest)
			break
		}
		out = append(out, rest[:i+1])
		rest = rest[i+1:]
	}
	return out
}

// answerSoFar is the text of the last assistant turn of a Chat body: a
// string content, or its text parts joined.
func answerSoFar(body []byte) string {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return ""
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role != "assistant" {
			continue
		}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			return s
		}
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		_ = json.Unmarshal(m.Content, &parts)
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	return ""
}

// cont answers a continuation behaviour's request.
func (u *Upstream) cont(w http.ResponseWriter, r *http.Request, b Behaviour, model string, body []byte, stream bool) {
	pieces := contPieces(body)
	if b == ContFail {
		if !stream {
			writeError(w, http.StatusServiceUnavailable, "overloaded (chaos)", "server_error")
			return
		}
		sseHeaders(w)
		_, _ = io.WriteString(w, contErrorEvent)
		return
	}
	if !stream {
		c, _ := json.Marshal(strings.Join(pieces, ""))
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"chatcmpl-cont","object":"chat.completion","created":1700000000,"model":"chaos","choices":[{"index":0,"message":{"role":"assistant","content":`+
			string(c)+`},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}}`)
		return
	}
	at := len(pieces) + 1 // no break
	if b != ContGood {
		key := r.URL.Path + " " + model
		u.mu.Lock()
		if u.contBroke[key] {
			u.contBroke[key] = false
		} else {
			at = u.rng.IntN(len(pieces) + 2)
			u.contBroke[key] = at <= len(pieces)
		}
		u.mu.Unlock()
	}
	paced := strings.HasSuffix(model, PacedSuffix)
	sseHeaders(w)
	_, _ = io.WriteString(w, "data: "+contChunk(`"role":"assistant","content":""`, "")+"\n\n")
	flush(w)
	for i, p := range pieces {
		if i == at {
			break
		}
		if paced && !u.pause(r, ContPacedGap) {
			return
		}
		c, _ := json.Marshal(p)
		_, _ = io.WriteString(w, "data: "+contChunk(`"content":`+string(c), "")+"\n\n")
		flush(w)
	}
	if at <= len(pieces) {
		switch b {
		case ContDrop:
			panic(http.ErrAbortHandler)
		case ContError:
			_, _ = io.WriteString(w, contErrorEvent)
			return
		case ContStall:
			u.stall(r)
			return
		}
	}
	_, _ = io.WriteString(w, "data: "+contChunk("", "stop")+"\n\ndata: [DONE]\n\n")
}

// pause waits d, or less when the request ends (false) or the upstream
// closes.
func (u *Upstream) pause(r *http.Request, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.Context().Done():
		return false
	case <-u.closed:
		return true
	case <-t.C:
		return true
	}
}

// contErrorEvent is the continuation behaviours' in-band server error.
const contErrorEvent = `data: {"error":{"message":"overloaded (chaos, mid-stream)","type":"server_error","code":null}}` + "\n\n"

// contChunk is one chat.completion.chunk of a continuation behaviour.
func contChunk(delta, finish string) string {
	fr := "null"
	if finish != "" {
		fr = strconv.Quote(finish)
	}
	return `{"id":"chatcmpl-cont","object":"chat.completion.chunk","created":1700000000,"model":"chaos","choices":[{"index":0,"delta":{` +
		delta + `},"finish_reason":` + fr + `}]}`
}
