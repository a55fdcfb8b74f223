package shadow

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestRunnerBounded(t *testing.T) {
	const maxC = 4
	r := NewRunner(maxC)
	release := make(chan struct{})
	var cur, peak, ran atomic.Int64
	f := func() {
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		<-release
		cur.Add(-1)
		ran.Add(1)
	}
	started := 0
	for range maxC {
		if !r.Go(f) {
			t.Fatal("Go refused a copy with free slots")
		}
		started++
	}
	// Every further copy is dropped at once, without blocking.
	for i := range 100 {
		done := make(chan bool, 1)
		go func() { done <- r.Go(f) }()
		select {
		case ok := <-done:
			if ok {
				t.Fatalf("extra copy %d started", i)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Go blocked when full")
		}
	}
	s := r.Stats()
	if s.Sent != maxC || s.Dropped != 100 || s.Running != maxC || s.MaxConcurrent != maxC {
		t.Fatalf("stats when full: %+v", s)
	}
	close(release)
	r.Wait()
	if s := r.Stats(); s.Running != 0 || ran.Load() != maxC {
		t.Fatalf("after Wait: running %d, ran %d", s.Running, ran.Load())
	}
	if p := peak.Load(); p > maxC {
		t.Fatalf("peak concurrency %d > %d", p, maxC)
	}
	// Slots are free again.
	if !r.Go(func() {}) {
		t.Fatal("Go refused after the copies ended")
	}
	r.Wait()
}

func TestRunnerConcurrentCallers(t *testing.T) {
	const maxC = 3
	r := NewRunner(maxC)
	var cur, peak atomic.Int64
	var okCount, dropCount atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 500 {
				ok := r.Go(func() {
					n := cur.Add(1)
					for {
						p := peak.Load()
						if n <= p || peak.CompareAndSwap(p, n) {
							break
						}
					}
					time.Sleep(50 * time.Microsecond)
					cur.Add(-1)
				})
				if ok {
					okCount.Add(1)
				} else {
					dropCount.Add(1)
				}
				_ = r.Stats()
			}
		})
	}
	wg.Wait()
	r.Wait()
	s := r.Stats()
	if p := peak.Load(); p > maxC {
		t.Fatalf("peak %d > %d", p, maxC)
	}
	if s.Sent != okCount.Load() || s.Dropped != dropCount.Load() || s.Sent+s.Dropped != 16*500 || s.Running != 0 {
		t.Fatalf("stats %+v, started %d dropped %d", s, okCount.Load(), dropCount.Load())
	}
	t.Logf("sent %d dropped %d peak %d", s.Sent, s.Dropped, peak.Load())
}

func TestRunnerWaitAndPanic(t *testing.T) {
	r := NewRunner(0) // means 1
	r.Wait()          // nothing running: returns at once
	var done atomic.Bool
	if !r.Go(func() { time.Sleep(20 * time.Millisecond); done.Store(true) }) {
		t.Fatal("not started")
	}
	r.Wait()
	if !done.Load() {
		t.Fatal("Wait returned before the copy ended")
	}
	if !r.Go(func() { panic("boom") }) {
		t.Fatal("not started")
	}
	r.Wait()
	if s := r.Stats(); s.Panics != 1 || s.Running != 0 || s.Sent != 2 {
		t.Fatalf("stats %+v", s)
	}
}

func TestRecordStats(t *testing.T) {
	r := NewRunner(2)
	primary := "The quick brown fox jumps over the lazy dog."
	r.Record(Result{OK: true, Status: 200, TTFT: 100 * time.Millisecond, Duration: time.Second,
		CompletionTokens: 10, ReasoningTokens: 4, Text: primary}, primary)
	r.Record(Result{OK: true, Status: 200, TTFT: 300 * time.Millisecond, Duration: 3 * time.Second,
		CompletionTokens: 20, Text: "completely different words here, nothing shared"}, primary)
	r.Record(Result{OK: true, Status: 200, TTFT: 200 * time.Millisecond, Duration: 2 * time.Second,
		CompletionTokens: 5, Text: "tool call"}, "") // no primary text: not compared
	r.Record(Result{Status: 503, Err: "upstream: 503 Service Unavailable"}, primary)
	r.Record(Result{Status: 429}, primary)
	s := r.Stats()
	if s.OK != 3 || s.Failed != 2 || s.LastError != "status 429" {
		t.Errorf("counts %+v", s)
	}
	if s.TTFTp50Ms != 200 || s.TTFTp95Ms != 300 || s.DurationP50Ms != 2000 || s.DurationP95Ms != 3000 {
		t.Errorf("latency %+v", s)
	}
	if s.Compared != 2 || s.MeanSimilarity != 0.5 {
		t.Errorf("comparison %+v", s)
	}
	wantRatio := (1 + float64(len("completely different words here, nothing shared"))/float64(len(primary))) / 2
	if math.Abs(s.MeanLengthRatio-wantRatio) > 1e-12 {
		t.Errorf("length ratio %v, want %v", s.MeanLengthRatio, wantRatio)
	}
	if s.CompletionTokens != 35 || s.ReasoningTokens != 4 {
		t.Errorf("tokens %+v", s)
	}
	if _, err := json.Marshal(s); err != nil {
		t.Fatal(err)
	}
	// The latency memory is bounded.
	for i := range 5 * latencyRing {
		r.Record(Result{OK: true, Duration: time.Duration(i) * time.Millisecond}, "")
	}
	if n := len(r.dur.v); n != latencyRing {
		t.Errorf("ring holds %d", n)
	}
	if s := r.Stats(); s.DurationP50Ms < 4*latencyRing {
		t.Errorf("p50 %v does not reflect recent copies", s.DurationP50Ms)
	}
	r.Record(Result{Err: strings.Repeat("é", 1000)}, "")
	if s := r.Stats(); len(s.LastError) > maxErrLen || !strings.HasPrefix(s.LastError, "éé") || strings.ContainsRune(s.LastError, '\uFFFD') {
		t.Errorf("last error capped badly: %d bytes", len(s.LastError))
	}
}

func TestRecordConcurrent(t *testing.T) {
	r := NewRunner(8)
	var wg sync.WaitGroup
	for i := range 200 {
		r.Go(func() {})
		wg.Go(func() {
			r.Record(Result{OK: i%4 != 0, TTFT: time.Millisecond, Duration: time.Duration(i) * time.Millisecond, Text: "a b c", CompletionTokens: 1}, "a b d")
			_ = r.Stats()
		})
	}
	wg.Wait()
	r.Wait()
	s := r.Stats()
	if s.OK != 150 || s.Failed != 50 || s.CompletionTokens != 150 || s.Compared != 150 {
		t.Fatalf("stats %+v", s)
	}
	if math.Abs(s.MeanSimilarity-1.0/3) > 1e-12 || s.MeanLengthRatio != 1 {
		t.Fatalf("means %+v", s)
	}
}

func TestSimilarity(t *testing.T) {
	cases := []struct {
		a, b string
		want float64
	}{
		{"", "", 1},
		{"hello world", "hello world", 1},
		{"Hello, World!", "hello world", 1}, // case and punctuation
		{"hello   world\n", "HELLO-WORLD", 1},
		{"", "hello", 0},
		{"!!!", "...", 1}, // no words on either side
		{"alpha beta gamma", "delta epsilon zeta", 0},
		{"a b c", "a b d", 1.0 / 3},                       // {ab bc} vs {ab bd}
		{"hello", "hello world", 0.5},                     // words: {hello} vs {hello world}
		{"the cat the cat", "the cat", 0.5},               // {the-cat cat-the} vs {the-cat}
		{"the cat the cat the cat", "the cat the cat", 1}, // sets, not counts
		{"北京欢迎你", "北京欢迎你", 1},                             // identical CJK
		{"北京欢迎你。", "北京欢迎你", 1},                            // CJK punctuation
		{"我爱北京", "我爱上海", 1.0 / 5},                         // {我爱 爱北 北京} vs {我爱 爱上 上海}
		{"今天天气很好", "明日は雨です", 0},                           // disjoint
		{"GPU 性能", "gpu性能", 1},                            // mixed scripts: gpu|性|能
		{"สวัสดีครับ", "สวัสดีครับ", 1},                   // Thai, marks attached
		{"naïve café", "NAÏVE CAFÉ", 1},                   // non-ASCII lower-casing
		{"cafe\u0301 ok", "cafe\u0301 ok", 1},             // combining mark
		{"cafe\u0301 ok", "cafe ok", 0},                   // different word
		{"x 1 2 3", "x 1 2 4", 2.0 / 4},                   // digits are words
		{"The answer is 42.", "the answer is 43", 2.0 / 4},
	}
	for _, c := range cases {
		got := Similarity(c.a, c.b)
		if math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Similarity(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
		if back := Similarity(c.b, c.a); back != got {
			t.Errorf("not symmetric: %q, %q: %v vs %v", c.a, c.b, got, back)
		}
	}
}

func TestSimilarityProperties(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("the a of model answer token stream 模型 回答 流 relay canary shadow fox 42 é ü ß")
	gen := func() string {
		var b strings.Builder
		for range rnd.IntN(60) {
			b.WriteString(words[rnd.IntN(len(words))])
			b.WriteString([]string{" ", ", ", ". ", "\n", ""}[rnd.IntN(5)])
		}
		return b.String()
	}
	for range 2000 {
		a, b := gen(), gen()
		s := Similarity(a, b)
		if s < 0 || s > 1 || math.IsNaN(s) {
			t.Fatalf("Similarity(%q, %q) = %v out of [0, 1]", a, b, s)
		}
		if s2 := Similarity(b, a); s2 != s {
			t.Fatalf("not symmetric on %q, %q: %v vs %v", a, b, s, s2)
		}
		if Similarity(a, a) != 1 || Similarity(a, strings.ToUpper(a)+" !") != 1 {
			t.Fatalf("self-similarity of %q not 1", a)
		}
	}
}

func TestSimilarityReadsPrefixOnly(t *testing.T) {
	base := strings.Repeat("w ", SimilarityRunes) // 2 runes per word: the prefix is exactly this
	a := base + "alpha beta gamma"
	b := base + "delta epsilon"
	if s := Similarity(a, b); s != 1 {
		t.Errorf("texts equal on the first %d runes: %v", SimilarityRunes, s)
	}
}

func TestSample(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 9))
	for _, p := range []float64{0, -1, math.NaN()} {
		for range 1000 {
			if Sample(p, rnd) || Sample(p, nil) {
				t.Fatalf("Sample(%v) true", p)
			}
		}
	}
	for range 1000 {
		if !Sample(100, rnd) || !Sample(150, nil) {
			t.Fatal("Sample(100) false")
		}
	}
	for _, p := range []float64{1, 10, 50} {
		const n = 100_000
		hits := 0
		for range n {
			if Sample(p, rnd) {
				hits++
			}
		}
		q := p / 100
		sigma := math.Sqrt(q * (1 - q) / n)
		if d := math.Abs(float64(hits)/n - q); d > 4*sigma {
			t.Errorf("Sample(%v): %v hits of %d (%.1f sigma)", p, hits, n, d/sigma)
		}
	}
	// The global generator path is safe for concurrent use.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				Sample(50, nil)
			}
		})
	}
	wg.Wait()
}
