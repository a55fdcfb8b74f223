package smoothness

import (
	"math"
	"math/bits"
	"time"
)

// The histogram is log-linear over whole microseconds (HDR-style): values
// below 2·subBuckets µs have one bucket each (exact); above, every power of
// two [2^m, 2^(m+1)) is split into subBuckets equal buckets. A bucket is
// then at most 1/subBuckets of its lower bound wide, and reporting its
// midpoint is off by at most 1/(2·subBuckets) ≈ 3.1 % (plus < 1 µs of
// truncation). Values of 2^(maxMSB+1) µs (≈ 134 s) and more share the last
// bucket; Max is always kept exactly, and a percentile is never reported
// above Max or below the smallest recorded value.
const (
	subBits    = 4
	subBuckets = 1 << subBits // 16 buckets per power of two
	maxMSB     = 26           // highest power of two with its own buckets: 2^26 µs ≈ 67 s
	nBuckets   = 2*subBuckets + (maxMSB-subBits)*subBuckets
)

// hist is a fixed-size duration histogram with weighted samples. Its zero
// value is empty and ready to use.
type hist struct {
	counts [nBuckets]uint32
	n      uint64 // total weight
	min    int64  // ns, valid when n > 0
	max    int64  // ns, valid when n > 0
}

// bucketOf returns the bucket of a value in microseconds.
func bucketOf(us uint64) int {
	if us < 2*subBuckets {
		return int(us)
	}
	msb := bits.Len64(us) - 1 // >= subBits+1
	if msb > maxMSB {
		return nBuckets - 1
	}
	shift := msb - subBits
	return 2*subBuckets + (msb-subBits-1)*subBuckets + int(us>>uint(shift)) - subBuckets
}

// bucketMid returns the midpoint of bucket i in microseconds.
func bucketMid(i int) float64 {
	if i < 2*subBuckets {
		return float64(i)
	}
	j := i - 2*subBuckets
	msb := j/subBuckets + subBits + 1
	mant := uint64(j%subBuckets + subBuckets)
	shift := uint(msb - subBits)
	lower := mant << shift
	return float64(lower) + float64(uint64(1)<<shift)/2
}

// add records d with weight w (w > 0). Negative durations count as 0.
func (h *hist) add(d time.Duration, w int) {
	if w <= 0 {
		return
	}
	ns := int64(d)
	if ns < 0 {
		ns = 0
	}
	if h.n == 0 || ns < h.min {
		h.min = ns
	}
	if h.n == 0 || ns > h.max {
		h.max = ns
	}
	h.n += uint64(w)
	h.counts[bucketOf(uint64(ns)/1000)] += uint32(w)
}

// quantile returns the nearest-rank q-quantile (0 < q <= 1): the
// midpoint of the bucket holding the ceil(q·n)-th smallest sample,
// clamped to [min, max].
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	// ceil, tolerant of float error (0.99·100 is 99.00000000000001).
	rank := uint64(math.Ceil(q*float64(h.n) - 1e-9))
	rank = max(rank, 1)
	rank = min(rank, h.n)
	var seen uint64
	for i := range h.counts {
		seen += uint64(h.counts[i])
		if seen >= rank {
			v := int64(bucketMid(i) * 1000)
			return time.Duration(min(max(v, h.min), h.max))
		}
	}
	return time.Duration(h.max)
}

// dist summarises the histogram.
func (h *hist) dist() Dist {
	if h.n == 0 {
		return Dist{}
	}
	return Dist{P50: h.quantile(0.50), P99: h.quantile(0.99), Max: time.Duration(h.max)}
}
