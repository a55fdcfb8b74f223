package pace

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/sse"
)

// BenchmarkPacerEvent measures the pacer's CPU per upstream event on a
// virtual clock: clustered deltas (20 every 300 ms), each pushed, with
// every tick the schedule asks for. ns/op is per upstream event, ticks
// included.
func BenchmarkPacerEvent(b *testing.B) {
	for _, m := range modes {
		b.Run(m.String(), func(b *testing.B) {
			evs := []sse.Event{
				chunkEvent("reasoning_content", " the"),
				chunkEvent("reasoning_content", " quick brown"),
				chunkEvent("content", " fox jumps"),
				chunkEvent("content", " over 这是一个"),
			}
			p := NewPacer(Config{Mode: m})
			now := t0
			var wake time.Time
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if i%20 == 0 {
					// The next burst, 300 ms on: run the ticks in between.
					next := now.Add(300 * time.Millisecond)
					for !wake.IsZero() && wake.Before(next) {
						_, wake = p.Next(wake)
					}
					now = next
				}
				ev := &evs[(i/20)%len(evs)]
				p.Push(ev, now)
				_, wake = p.Next(now)
			}
		})
	}
}

// BenchmarkRunEvent measures Run end to end (reader goroutine, handoff,
// writes) per upstream event, in mode off so wall time is CPU time.
func BenchmarkRunEvent(b *testing.B) {
	ev := chunkEvent("content", " token")
	body := strings.Repeat(string(ev.Raw), 1000)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N / 1000 {
		rd := sse.NewReader(strings.NewReader(body), 0)
		first, _ := rd.Next()
		Run(context.Background(), Config{Mode: ModeOff}, []sse.Event{first}, rd, discard{}, func() {})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) Flush() error                { return nil }

// idleBody delivers its prefix, then blocks like an upstream that is
// thinking, until released.
type idleBody struct {
	prefix  []byte
	release chan struct{}
}

func (b *idleBody) Read(p []byte) (int, error) {
	if len(b.prefix) > 0 {
		n := copy(p, b.prefix)
		b.prefix = b.prefix[n:]
		return n, nil
	}
	<-b.release
	return 0, io.EOF
}

// BenchmarkOpenStreamMemory opens many paced streams that each got a
// burst and now wait for the upstream, and reports the memory each holds
// (heap and goroutine stacks, both goroutines of a stream counted): the
// reader's buffer, the pacer, its recorder, and an armed heartbeat timer.
func BenchmarkOpenStreamMemory(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for range b.N {
				b.ReportMetric(streamMemory(b, n), "bytes/stream")
			}
		})
	}
}

func streamMemory(b *testing.B, n int) float64 {
	var burst strings.Builder
	for i := range 20 {
		ev := chunkEvent("content", fmt.Sprintf(" word%d", i))
		burst.Write(ev.Raw)
	}
	release := make(chan struct{})
	var wg sync.WaitGroup
	before := memInUse()
	for range n {
		body := &idleBody{prefix: []byte(burst.String()), release: release}
		rd := sse.NewReader(body, 0)
		first, _ := rd.Next()
		wg.Go(func() {
			Run(context.Background(), Config{Mode: ModePace, Heartbeat: 15 * time.Second},
				[]sse.Event{first.Clone()}, rd, discard{}, func() {})
		})
	}
	time.Sleep(time.Second) // every burst is paced out by now
	after := memInUse()
	close(release)
	wg.Wait()
	return float64(after-before) / float64(n)
}

func memInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc + ms.StackInuse
}
