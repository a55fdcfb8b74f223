package llmrelay_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Large bodies read into pooled buffers reach the upstream intact while
// other requests reuse the buffers (a buffer back in the pool before the
// request is done with it shows as a corrupted body), with a first target
// that answers 500 at once and reads the body slowly, so that the
// transport is still sending from the buffer when the relay moves on.
func TestLargeBodiesPooledIntact(t *testing.T) {
	early := slowReader(t)
	check := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
			Metadata struct {
				Sum string `json:"sum"`
			} `json:"metadata"`
		}
		raw, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(raw, &body); err != nil || len(body.Messages) != 1 {
			answerJSON(w, 400, fmt.Sprintf(`{"error":{"message":%q}}`, fmt.Sprint("unreadable body: ", err)))
			return
		}
		if s := sha256.Sum256([]byte(body.Messages[0].Content)); hex.EncodeToString(s[:]) != body.Metadata.Sum {
			answerJSON(w, 400, `{"error":{"message":"the prompt does not match its sum"}}`)
			return
		}
		answerJSON(w, 200, okCompletion)
	}))
	t.Cleanup(check.Close)
	logFile := startRelay(t, fmt.Sprintf(`llm_relay {
		upstream early http://%s/v1
		upstream check %s/v1
		model chat {
			to early m
			to check m
		}
		failover {
			attempts 2
			backoff 1ms 1ms
		}
	}`, early, check.URL))

	const workers, each = 4, 4
	var wg sync.WaitGroup
	errs := make(chan string, workers*each)
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range each {
				content := randomText(rng, 70_000+rng.IntN(400_000))
				sum := sha256.Sum256([]byte(content))
				body := fmt.Sprintf(`{"model":"chat","messages":[{"role":"user","content":%q}],"metadata":{"sum":%q}}`, content, hex.EncodeToString(sum[:]))
				resp, err := httpClient.Post(relayBase+"/v1/chat/completions", "application/json", strings.NewReader(body))
				if err != nil {
					errs <- err.Error()
					continue
				}
				out, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					errs <- fmt.Sprintf("status %d: %.200s", resp.StatusCode, out)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if t.Failed() {
		for _, l := range strings.Split(readLog(t, logFile), "\n") {
			if strings.Contains(l, "llm_relay") || strings.Contains(l, "relayed") {
				t.Log(l[:min(len(l), 700)])
			}
		}
	}
}

func randomText(rng *rand.Rand, n int) string {
	const letters = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,"
	var b strings.Builder
	b.Grow(n)
	for range n {
		b.WriteByte(letters[rng.IntN(len(letters))])
	}
	return b.String()
}

// slowReader is an upstream that answers 500 as soon as it has a
// request's headers, then reads the body slowly (8 KB every 10 ms), with
// a small receive buffer so that the sender's writes wait for it; then the
// next request on the connection. It returns its host:port.
func slowReader(t *testing.T) string {
	t.Helper()
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) {
			_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 8<<10)
		})
	}}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	const answer = `{"error":{"message":"boom","type":"server_error","code":null}}`
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				br := bufio.NewReaderSize(conn, 8<<10)
				for {
					length := -1
					for { // the request line and headers
						line, err := br.ReadString('\n')
						if err != nil {
							return
						}
						if line == "\r\n" {
							break
						}
						if v, ok := strings.CutPrefix(strings.ToLower(line), "content-length:"); ok {
							length, _ = strconv.Atoi(strings.TrimSpace(v))
						}
					}
					if length < 0 {
						return
					}
					fmt.Fprintf(conn, "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(answer), answer)
					buf := make([]byte, 8<<10)
					for length > 0 {
						n, err := br.Read(buf[:min(len(buf), length)])
						if err != nil {
							return
						}
						length -= n
						time.Sleep(10 * time.Millisecond)
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}
