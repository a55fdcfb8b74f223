package health

import (
	"errors"
	"strings"
)

// Hint is a client's region hint (the relay's X-Region-Hint header),
// parsed: nothing, [HintAuto], a region code to prefer, or a region code
// to keep to (`<code>!`, a strict pin for data residency).
type Hint struct {
	Region string // the region code; "" for none or auto
	Auto   bool   // auto: the lowest measured latency within each tier
	Strict bool   // <code>!: only that region's targets are tried
}

// ParseHint parses a hint: "" (none), "auto" (any case), "<code>" or
// "<code>!", spaces around it ignored. A code is compared
// case-insensitively wherever it is used. "!" alone and "auto!" are
// errors: there is no region to keep to.
func ParseHint(s string) (Hint, error) {
	s = strings.TrimSpace(s)
	code, strict := strings.CutSuffix(s, "!")
	code = strings.TrimSpace(code)
	switch {
	case strict && code == "":
		return Hint{}, errors.New("a strict pin needs a region code before the '!', such as nrt!")
	case strings.EqualFold(code, HintAuto) && strict:
		return Hint{}, errors.New("auto picks a region by latency and cannot be pinned; pin a region code, such as nrt!")
	case strings.EqualFold(code, HintAuto):
		return Hint{Auto: true}, nil
	case strings.ContainsAny(code, "!, \t"):
		return Hint{}, errors.New("a region hint is one region code, auto, or one code followed by '!'")
	}
	return Hint{Region: code, Strict: strict}, nil
}

// String is the hint as [Order] takes it: [HintAuto], the region code, or
// "".
func (h Hint) String() string {
	if h.Auto {
		return HintAuto
	}
	return h.Region
}
