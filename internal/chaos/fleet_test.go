package chaos

import (
	"strings"
	"testing"
	"time"
)

func TestCheckConcurrency(t *testing.T) {
	for _, tt := range []struct {
		limit, held, tries, admitted int
		want                         string // a word of the verdict; "" = ok
	}{
		{3, 2, 4, 1, ""},
		{3, 2, 4, 2, "broken"},
		{3, 2, 4, 4, "broken"}, // a negative count read as such
		{3, 2, 4, 0, "shut"},   // 3 in flight from a clock an hour ahead
		{3, 3, 4, 0, ""},
		{3, 0, 2, 2, ""}, // fewer tries than room
	} {
		got := CheckConcurrency(tt.limit, tt.held, tt.tries, tt.admitted)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("CheckConcurrency(%d, %d, %d, %d) = %q, want %q", tt.limit, tt.held, tt.tries, tt.admitted, got, tt.want)
		}
	}
}

func TestCheckRPM(t *testing.T) {
	for _, tt := range []struct {
		a, b    int
		elapsed time.Duration
		want    string
	}{
		{20, 10, time.Second, ""},
		{20, 11, time.Second, ""},     // rounding
		{20, 12, 2 * time.Second, ""}, // 1 refilled in 2 s at rpm 30
		{20, 13, 2 * time.Second, "broken"},
		{20, 30, time.Second, "broken"}, // B never saw A's 20
		{20, 9, time.Second, ""},
		{20, 8, time.Second, "shut"},
		{0, 0, time.Second, "shut"}, // A locked out by a counter's jump
	} {
		got := CheckRPM(30, 20, tt.a, tt.b, tt.elapsed)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("CheckRPM(30, 20, %d, %d, %s) = %q, want %q", tt.a, tt.b, tt.elapsed, got, tt.want)
		}
	}
}

func TestRedisCasesPlantUnderThePrefix(t *testing.T) {
	k := RedisKeys{Prefix: "p:", Conc: "c", RPM: "r", Other: "o", Day: "2026-01-02"}
	now := time.Unix(1_700_000_000, 0)
	names := map[string]bool{}
	for _, c := range RedisCases() {
		if names[c.Name] || !strings.HasPrefix(c.Name, "redis-") || c.About == "" {
			t.Errorf("case %q: a name of its own starting redis-, and an about", c.Name)
		}
		names[c.Name] = true
		cmds := c.Plant(k, now)
		if c.Then != nil {
			cmds = append(cmds, c.Then(k, now)...)
		}
		for _, cmd := range cmds {
			for _, arg := range cmd[1:2] {
				if !strings.HasPrefix(arg.(string), "p:") {
					t.Errorf("case %s: %v writes outside the prefix", c.Name, cmd)
				}
			}
		}
	}
	for _, want := range []string{"redis-wrongtype", "redis-negative", "redis-future"} {
		if !names[want] {
			t.Errorf("no case %s", want)
		}
	}
}
