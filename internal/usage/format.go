package usage

import (
	"math"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"
)

// FormatUSD formats a dollar amount for people: 2 decimals with thousands
// separators from $1 up ("$1,234.56"), up to 4 decimals below ("$0.0123",
// "$0.50"), and 2 significant digits below a cent ("$0.0000075",
// "$0.00001").
// Negative amounts are "-$1.00"; NaN and infinities are spelled out.
func FormatUSD(v float64) string {
	switch {
	case math.IsNaN(v):
		return "$NaN"
	case math.IsInf(v, 1):
		return "$Inf"
	case math.IsInf(v, -1):
		return "-$Inf"
	}
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	var s string
	switch {
	case v == 0:
		return "$0.00"
	case v >= 1:
		s = strconv.FormatFloat(v, 'f', 2, 64)
		intPart, frac, _ := strings.Cut(s, ".")
		if n, err := strconv.ParseInt(intPart, 10, 64); err == nil {
			s = humanize.Comma(n) + "." + frac
		}
	case v >= 0.01:
		s = trimZeros(strconv.FormatFloat(v, 'f', 4, 64))
	default:
		// 2 significant digits: as many decimals as the leading zeros
		// after the point, plus 2.
		d := 2 - int(math.Floor(math.Log10(v))) - 1
		s = trimZeros(strconv.FormatFloat(v, 'f', d, 64))
	}
	return sign + "$" + s
}

// trimZeros trims a decimal's trailing zeros, keeping 2 decimals.
func trimZeros(s string) string {
	for len(s) > 0 && s[len(s)-1] == '0' && len(s)-strings.IndexByte(s, '.') > 3 {
		s = s[:len(s)-1]
	}
	return s
}

// FormatTokens formats a token count with thousands separators: "12,345".
func FormatTokens(n int) string {
	return humanize.Comma(int64(n))
}
