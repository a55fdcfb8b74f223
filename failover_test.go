package llmrelay

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestTriggers(t *testing.T) {
	tr, err := parseTriggers(defaultFailoverOn)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		class  failureClass
		status int
		want   bool
	}{
		{classConnect, 0, true}, {classTimeout, 0, true}, {classStream, 0, true},
		{classStatus, 429, true}, {classStatus, 500, true}, {classStatus, 503, true},
		{classStatus, 400, false}, {classStatus, 404, false}, {classStatus, 408, false},
	}
	for _, c := range cases {
		if got := tr.retryable(c.class, c.status); got != c.want {
			t.Errorf("default retryable(%s, %d) = %v", c.class, c.status, got)
		}
	}
	only, _ := parseTriggers([]string{"408", "4xx"})
	if only.retryable(classConnect, 0) || !only.retryable(classStatus, 408) || !only.retryable(classStatus, 404) || only.retryable(classStatus, 500) {
		t.Errorf("custom triggers misclassify")
	}
	for _, bad := range []string{"6xx", "abc", "99", "600", "5x"} {
		if _, err := parseTriggers([]string{bad}); err == nil || !strings.Contains(err.Error(), "use connect, timeout") {
			t.Errorf("parseTriggers(%q) err = %v", bad, err)
		}
	}
}

func TestBackoffIsFullJitterCapped(t *testing.T) {
	b := backoffPolicy{base: 100 * time.Millisecond, max: 2 * time.Second}
	rng := rand.New(rand.NewPCG(1, 2))
	if d := b.delay(0, rng); d != 0 {
		t.Errorf("first visit waits %s", d)
	}
	for visit, ceil := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond, 10: 2 * time.Second} {
		var maxSeen, minSeen time.Duration = 0, time.Hour
		for i := 0; i < 2000; i++ {
			d := b.delay(visit, rng)
			maxSeen, minSeen = max(maxSeen, d), min(minSeen, d)
		}
		if maxSeen > ceil || maxSeen < ceil*8/10 || minSeen > ceil/10 {
			t.Errorf("visit %d: delays in [%s, %s], want spread over [0, %s]", visit, minSeen, maxSeen, ceil)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	cases := map[string]time.Duration{
		"":     0,
		"3":    3 * time.Second,
		"0.5":  500 * time.Millisecond,
		"-1":   0,
		"soon": 0,
		now.Add(7 * time.Second).Format(http.TimeFormat):  7 * time.Second,
		now.Add(-7 * time.Second).Format(http.TimeFormat): 0,
	}
	for in, want := range cases {
		if got := parseRetryAfter(in, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestChainCursor(t *testing.T) {
	now := time.Unix(1000, 0)
	deadline := now.Add(10 * time.Second)
	b := backoffPolicy{base: time.Millisecond, max: time.Millisecond}
	c := newChainCursor(2, 5)
	var order []int
	for {
		s, ok := c.nextStep(now, deadline, b, nil)
		if !ok {
			break
		}
		if s.skip != "" {
			order = append(order, -1)
			continue
		}
		order = append(order, s.idx)
		ra := time.Duration(0)
		if s.idx == 0 {
			ra = time.Minute // target 0 says: not before a minute from now
		}
		c.tried(s.idx, now, ra)
	}
	// 0, 1, 0 skipped (Retry-After past the deadline), 1, 0 skipped
	want := []int{0, 1, -1, 1, -1}
	if len(order) != len(want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order %v, want %v", order, want)
		}
	}

	// A Retry-After inside the deadline becomes a wait.
	c = newChainCursor(1, 2)
	s, _ := c.nextStep(now, deadline, b, nil)
	c.tried(s.idx, now, 2*time.Second)
	s, _ = c.nextStep(now, deadline, b, nil)
	if s.skip != "" || s.wait < 2*time.Second {
		t.Errorf("step %+v, want a wait of at least 2s", s)
	}
	// attempts 0 means the chain's length.
	if c := newChainCursor(3, 0); c.slots != 3 {
		t.Errorf("slots %d", c.slots)
	}
}

// A target excluded from the request (out of quota) is skipped at every
// later slot, with no wait; the others go on as before.
func TestChainCursorExclude(t *testing.T) {
	c := newChainCursor(2, 5)
	now := time.Now()
	deadline := now.Add(time.Minute)
	b := backoffPolicy{base: time.Second, max: time.Second}
	s, _ := c.nextStep(now, deadline, b, rand.New(rand.NewPCG(1, 2)))
	c.tried(s.idx, now, 0)
	c.exclude(s.idx)
	var got []string
	for {
		s, ok := c.nextStep(now, deadline, b, rand.New(rand.NewPCG(1, 2)))
		if !ok {
			break
		}
		if s.idx == 0 {
			t.Fatalf("the excluded target is tried again: %+v", s)
		}
		got = append(got, strconv.Itoa(s.idx)+strings.Fields(s.skip + " -")[0])
		c.tried(s.idx, now, 0)
	}
	// Its turns go to the other target: the four slots left are its.
	if strings.Join(got, ",") != "1-,1-,1-,1-" {
		t.Fatalf("steps %v", got)
	}
	// A chain whose every target is out ends: no step, no endless loop.
	c = newChainCursor(2, 1)
	c.exclude(0)
	c.exclude(1)
	c.unuse()
	if s, ok := c.nextStep(now, deadline, b, nil); ok {
		t.Fatalf("a step %+v with every target out", s)
	}
}

// TestChainCursorExcludeGivesTheSlotBack: with `attempts 1`, a first
// target that cannot serve the request (excluded, its slot given back)
// leaves the one attempt to the next.
func TestChainCursorExcludeGivesTheSlotBack(t *testing.T) {
	c := newChainCursor(3, 1)
	now := time.Now()
	s, ok := c.nextStep(now, now.Add(time.Minute), backoffPolicy{}, nil)
	if !ok || s.idx != 0 {
		t.Fatalf("first step %+v %v", s, ok)
	}
	c.exclude(s.idx)
	c.unuse()
	s, ok = c.nextStep(now, now.Add(time.Minute), backoffPolicy{}, nil)
	if !ok || s.idx != 1 || s.skip != "" {
		t.Fatalf("after the first target was excluded: %+v %v; want target 1 tried", s, ok)
	}
	c.tried(s.idx, now, 0)
	if s, ok := c.nextStep(now, now.Add(time.Minute), backoffPolicy{}, nil); ok {
		t.Fatalf("a second attempt %+v with attempts 1", s)
	}
}
