package traces

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func post(t *testing.T, ctx context.Context, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// timedReader stamps every read with its offset from start.
type timedReader struct {
	r     io.Reader
	start time.Time
	buf   bytes.Buffer
	marks []mark // where each read ended and when
}

type mark struct {
	end int
	at  time.Duration
}

func (tr *timedReader) Read(p []byte) (int, error) {
	n, err := tr.r.Read(p)
	if n > 0 {
		tr.buf.Write(p[:n])
		tr.marks = append(tr.marks, mark{tr.buf.Len(), time.Since(tr.start)})
	}
	return n, err
}

// arrival returns when byte offset end had arrived.
func (tr *timedReader) arrival(end int) time.Duration {
	for _, m := range tr.marks {
		if m.end >= end {
			return m.at
		}
	}
	return -1
}

func TestReplayBytesAndTiming(t *testing.T) {
	if testing.Short() {
		t.Skip("replays in real time")
	}
	srv := httptest.NewServer(Handler())
	t.Cleanup(srv.Close) // after the parallel subtests
	for _, name := range []string{"error-mid", "eof-no-done", "final-dump"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tr, _ := ByName(name)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			resp := post(t, ctx, srv.URL+"/v1/chat/completions", `{"model":"`+name+`","stream":true,"messages":[]}`)
			defer resp.Body.Close()
			start := time.Now()
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("status %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			rd := &timedReader{r: resp.Body, start: start}
			if _, err := io.Copy(io.Discard, rd); err != nil {
				t.Fatal(err)
			}
			var want []byte
			for _, s := range tr.Steps {
				want = append(want, s.Raw...)
			}
			if !bytes.Equal(rd.buf.Bytes(), want) {
				t.Fatalf("replayed bytes differ (%d vs %d)", rd.buf.Len(), len(want))
			}
			// Every step arrives no earlier than its offset (less a
			// little: the clock starts after the headers arrived), and
			// not absurdly later (the bound allows for loaded machines
			// and -race).
			end := 0
			for i, s := range tr.Steps {
				end += len(s.Raw)
				got := rd.arrival(end)
				if got < s.At-20*time.Millisecond || got > s.At+2*time.Second {
					t.Errorf("step %d (at %v) arrived at %v", i, s.At, got)
				}
			}
		})
	}
}

func TestReplayCancel(t *testing.T) {
	srv := httptest.NewServer(Handler())
	ctx, cancel := context.WithCancel(context.Background())
	resp := post(t, ctx, srv.URL+"/v1/chat/completions", `{"model":"onoff","stream":true}`)
	buf := make([]byte, 64)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	done := make(chan struct{})
	go func() { srv.Close(); close(done) }() // waits for the handler
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("the replay did not stop when the client went away")
	}
}

func TestErrorsAndModels(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	ctx := context.Background()
	for _, c := range []struct {
		body, code string
		status     int
	}{
		{`{"model":"nope","stream":true}`, "model_not_found", 404},
		{`{"model":"steady"}`, "stream_required", 400},
		{`{`, "invalid_json", 400},
	} {
		resp := post(t, ctx, srv.URL+"/v1/chat/completions", c.body)
		var e struct {
			Error struct {
				Message, Type, Code string
			}
		}
		err := json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if err != nil || resp.StatusCode != c.status || e.Error.Code != c.code || e.Error.Type != "invalid_request_error" || e.Error.Message == "" {
			t.Errorf("%s: status %d, %+v, %v", c.body, resp.StatusCode, e, err)
		}
	}
	resp, err := http.Get(srv.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Object string
		Data   []struct{ ID string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if list.Object != "list" || len(list.Data) != len(required) || list.Data[0].ID != required[0] {
		t.Fatalf("models %+v", list)
	}
	resp2, err := http.Get(srv.URL + "/v1/chat/completions")
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET chat: %d", resp2.StatusCode)
	}
}
