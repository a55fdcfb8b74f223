package llmrelay_test

// Upstream streams with bare-CR line endings, read by the official openai-go
// client through the relay. openai-go (like openai-python and openai-node)
// splits lines on LF only, so whatever the relay writes after an upstream
// block must start on a fresh line, and a CR-only stream must reach it with
// LF line endings.

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// crRelay has one fake upstream and two models: `chat` paced, `chatoff`
// forwarded as it comes. Both send heartbeats every 50 ms, so a heartbeat
// also lands right after an upstream block whenever the upstream pauses.
func crRelay(u *fakeUpstream) string {
	return fmt.Sprintf(`llm_relay {
		key sk-test-client
		upstream u %s
		model chat {
			to u
			smoothing pace {
				heartbeat 50ms
			}
		}
		model chatoff {
			to u
			smoothing off {
				heartbeat 50ms
			}
		}
	}`, u.v1())
}

// writeRaw sends the upstream's stream piece by piece, flushing each piece
// and pausing gap after it, so that the relay's reads end where the pieces
// do (as they do in practice when there is a pause).
func writeRaw(w http.ResponseWriter, gap time.Duration, pieces ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for _, p := range pieces {
		_, _ = w.Write([]byte(p))
		w.(http.Flusher).Flush()
		time.Sleep(gap)
	}
}

// crStream reads one streamed chat completion with openai-go and returns
// the content it assembled, the number of chunks and the stream's error. Its
// own transport keeps it off idle connections that an earlier test's config
// reload closed (a POST on one fails with EOF and is not retried).
func crStream(t *testing.T, model string) (content string, chunks int, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := openai.NewClient(
		option.WithBaseURL(relayBase+"/v1/"),
		option.WithAPIKey("sk-test-client"),
		option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: tr}),
	)
	stream := client.Chat.Completions.NewStreaming(ctx, chatParams(model))
	defer stream.Close()
	var b strings.Builder
	for stream.Next() {
		chunks++
		for _, c := range stream.Current().Choices {
			b.WriteString(c.Delta.Content)
		}
	}
	return b.String(), chunks, stream.Err()
}

var crWords = []string{"one", "two", "three"}

// chunksOK: mode off forwards every upstream chunk as it is; the pacer may
// merge the deltas of chunks that arrive together.
func chunksOK(model string, chunks int) bool {
	if model == "chatoff" {
		return chunks == len(crWords)
	}
	return chunks >= 1 && chunks <= len(crWords)
}

// TestBareCRBlockThenRelayError: the upstream ends every block with a bare
// CR ("\r\r", or "\n\r": an LF line end, then a blank line that is a lone
// CR) and then closes without [DONE]. The relay appends its
// upstream_stream_truncated error event; openai-go must get every chunk and
// then that error, every time, whether the upstream sends its blocks at once
// or with pauses in which the relay writes heartbeats.
func TestBareCRBlockThenRelayError(t *testing.T) {
	for _, end := range []string{"\r\r", "\n\r"} {
		t.Run(fmt.Sprintf("%q", end), func(t *testing.T) {
			u := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
				var pieces []string
				for _, word := range crWords {
					pieces = append(pieces, "data: "+chunk(word)+end)
				}
				// Half the requests (of each model) pause longer than
				// the heartbeat, so keep-alives are written right after
				// the bare-CR blocks; the others send everything at once.
				gap := time.Duration(0)
				if n%4 >= 2 {
					gap = 120 * time.Millisecond
				}
				writeRaw(w, gap, pieces...)
			})
			startRelay(t, crRelay(u))
			for i := range 6 {
				for _, model := range []string{"chat", "chatoff"} {
					content, chunks, err := crStream(t, model)
					if content != "onetwothree" || !chunksOK(model, chunks) {
						t.Errorf("run %d, %s: %d chunks, content %q (err %v); want content %q", i, model, chunks, content, err, "onetwothree")
					}
					if err == nil || !strings.Contains(err.Error(), "upstream_stream_truncated") {
						t.Errorf("run %d, %s: stream error %v, want the relay's upstream_stream_truncated", i, model, err)
					}
				}
			}
		})
	}
}

// TestCROnlyStreamReachesOpenAIGo: an upstream that uses a lone CR for
// every line ending, [DONE] included, is read by openai-go in full and
// without error.
func TestCROnlyStreamReachesOpenAIGo(t *testing.T) {
	u := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		var pieces []string
		for _, word := range crWords {
			pieces = append(pieces, ": upstream comment\r\rdata: "+chunk(word)+"\r\r")
		}
		pieces = append(pieces, "data: [DONE]\r\r")
		writeRaw(w, 20*time.Millisecond, pieces...)
	})
	startRelay(t, crRelay(u))
	for i := range 3 {
		for _, model := range []string{"chat", "chatoff"} {
			content, chunks, err := crStream(t, model)
			if err != nil || content != "onetwothree" || !chunksOK(model, chunks) {
				t.Errorf("run %d, %s: %d chunks, content %q, err %v; want content %q, no error", i, model, chunks, content, err, "onetwothree")
			}
		}
	}
}

// TestCRLFSplitAtReadBoundary: a CRLF upstream whose reads end between the
// CR and the LF of every blank line, then a close without [DONE]. The relay
// returns each block at the CR without waiting for the LF (and turns that CR
// into LF), then skips the LF: no blank line lost or doubled, every chunk
// and the truncation error reach openai-go.
func TestCRLFSplitAtReadBoundary(t *testing.T) {
	u := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		var pieces []string
		for _, word := range crWords {
			pieces = append(pieces, "\ndata: "+chunk(word)+"\r\n\r")
		}
		pieces[0] = pieces[0][1:]
		writeRaw(w, 120*time.Millisecond, pieces...)
	})
	startRelay(t, crRelay(u))
	for i := range 3 {
		for _, model := range []string{"chat", "chatoff"} {
			content, chunks, err := crStream(t, model)
			if content != "onetwothree" || !chunksOK(model, chunks) {
				t.Errorf("run %d, %s: %d chunks, content %q (err %v)", i, model, chunks, content, err)
			}
			if err == nil || !strings.Contains(err.Error(), "upstream_stream_truncated") {
				t.Errorf("run %d, %s: stream error %v, want the relay's upstream_stream_truncated", i, model, err)
			}
		}
	}
}

// The raw bytes the client gets for a bare-CR upstream: every upstream block
// re-emitted with LF endings, the relay's own events on lines of their own.
func TestBareCRWireBytes(t *testing.T) {
	u := newFakeUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		writeRaw(w, 0, "data: "+chunk("one")+"\r\r", "data: "+chunk("two")+"\n\r")
	})
	startRelay(t, crRelay(u))
	body := readAll(t, post(t, `{"model":"chatoff","stream":true,"messages":[]}`, "Authorization", "Bearer sk-test-client"))
	if strings.Contains(strings.ReplaceAll(body, "\r\n", ""), "\r") {
		t.Errorf("the client got a bare CR: %q", body)
	}
	want := "data: " + chunk("one") + "\n\ndata: " + chunk("two") + "\n\ndata: "
	if !strings.HasPrefix(strings.ReplaceAll(body, ": keep-alive\n\n", ""), want) {
		t.Errorf("body %q, want it to start %q", body, want)
	}
	datas := sseDatas(body)
	if len(datas) != 3 || decodeErr(t, datas[2]).Error.Code != "upstream_stream_truncated" {
		t.Errorf("client saw %q", datas)
	}
}
