package smoothness

import "math"

// Rate windows slide: a window of Window (100 ms) starts every
// Window/slideSteps (10 ms) from a side's first event carrying runes.
//
// Why sliding, not a fixed grid: with windows end to end, an upstream or
// a pacer whose events fall on the grid's edges (bursts every 150 or
// 300 ms from the first, ticks of 33.3 ms) is measured at the whim of
// sub-millisecond jitter, each late event moving a whole burst into the
// next window. The same trace's input CV varied from 0.44 to 0.60
// between real-time runs. A sliding window puts an edge near an event
// for one start in ten at most, so the CV no longer depends on where
// the grid happens to fall.
const slideSteps = 10

// step is the spacing of window starts, in ns.
const step = int64(Window) / slideSteps

// rateWindows accumulates the sliding windowed rate of one side: runes
// per step-wide bin, the last slideSteps bins kept, and a window value
// (the sum of slideSteps consecutive bins) pushed each time a bin closes.
type rateWindows struct {
	active bool
	start  int64 // first event carrying runes
	last   int64 // latest event carrying runes
	cur    int64 // index of the open bin
	bins   [slideSteps]int64
	total  int64 // runes of the bins kept
	// Welford state over complete windows.
	n        int64
	nonzero  int64 // windows with runes
	mean, m2 float64
	// Windows skipFrom … skipTo (by starting bin) are left out: the
	// last silence's (see exclude).
	skipFrom, skipTo int64
}

// add puts runes into the bin of ns, closing the bins before it. Events
// earlier than the open bin (out of order) count in it.
func (w *rateWindows) add(ns, runes int64) {
	if !w.active {
		*w = rateWindows{active: true, start: ns, last: ns, skipFrom: 1, skipTo: 0}
		w.bins[0], w.total = runes, runes
		return
	}
	w.last = max(w.last, ns)
	w.advance((ns - w.start) / step)
	w.bins[w.cur%slideSteps] += runes
	w.total += runes
}

// advance closes the bins before bin idx. Closing bin b completes the
// window of bins b-slideSteps+1 … b.
func (w *rateWindows) advance(idx int64) {
	for w.cur < idx {
		w.complete(w.cur-slideSteps+1, w.total)
		w.cur++
		w.total -= w.bins[w.cur%slideSteps] // the oldest bin leaves the window
		w.bins[w.cur%slideSteps] = 0
		if idx > w.cur && w.total == 0 {
			// Every bin kept is empty: so is every window completed
			// from here to idx, those starting at cur-9 … idx-10.
			from, to := w.cur-slideSteps+1, idx-slideSteps
			k := to - from + 1
			if lo, hi := max(from, w.skipFrom), min(to, w.skipTo); hi >= lo {
				k -= hi - lo + 1
			}
			w.pushZeros(k)
			w.cur = idx
		}
	}
}

// exclude leaves out the windows of a silence whose unfillable part is
// (from, to): those that start after this side's last text before it
// (lastText) and before to, and at most half a window before from. So
// the windows of the silence are not counted, as none are before a
// side's first event: the input's burst that ends the silence, say, or
// the output's drain that ends early, count only in windows that start
// with them. It must be called before any event at or after to is
// recorded on this side (before any such window is complete).
func (w *rateWindows) exclude(from, to, lastText int64) {
	if !w.active {
		return
	}
	first := max(ceilDiv(from-int64(Window)/2-w.start, step), (lastText-w.start)/step+1, 0)
	// Bins close lazily, at the next event: first complete the windows
	// before this silence's, under the last silence's range.
	w.advance(min(first+slideSteps-1, (to-w.start)/step))
	w.skipFrom, w.skipTo = first, ceilDiv(to-w.start, step)-1
}

func ceilDiv(a, b int64) int64 {
	if a <= 0 {
		return -((-a) / b)
	}
	return (a + b - 1) / b
}

// complete adds the window starting at bin j, holding runes runes,
// unless it does not exist (j < 0) or is left out.
func (w *rateWindows) complete(j, runes int64) {
	if j < 0 || j >= w.skipFrom && j <= w.skipTo {
		return
	}
	w.pushWindow(runes)
}

// pushWindow adds one complete window holding runes runes.
func (w *rateWindows) pushWindow(runes int64) {
	if runes > 0 {
		w.nonzero++
	}
	w.push(float64(runes))
}

// push adds one window value (Welford).
func (w *rateWindows) push(x float64) {
	w.n++
	d := x - w.mean
	w.mean += d / float64(w.n)
	w.m2 += d * (x - w.mean)
}

// pushZeros adds k empty windows at once (Chan et al.'s merge of a group
// of k zeros: mean 0, M2 0).
func (w *rateWindows) pushZeros(k int64) {
	if k <= 0 {
		return
	}
	n := w.n + k
	d := -w.mean
	w.m2 += d * d * float64(w.n) * float64(k) / float64(n)
	w.mean += d * float64(k) / float64(n)
	w.n = n
}

// closeLast adds the window that ends with the open bin (on a copy: see
// cv and steady). Windows reaching past a side's last event (or before
// its first) are not counted: they would hold part of a window's time
// and look like a slow spell at every stream's end.
func (w *rateWindows) closeLast() {
	w.complete(w.cur-slideSteps+1, w.total)
}

// steady returns the share of the counted windows that hold runes.
func (w rateWindows) steady() float64 {
	if !w.active {
		return 0
	}
	w.closeLast()
	if w.n <= 0 {
		return 0
	}
	return float64(w.nonzero) / float64(w.n)
}

// cv returns the CV of the counted windows: those from the side's first
// event carrying runes to its last.
func (w rateWindows) cv() float64 {
	if !w.active {
		return 0
	}
	w.closeLast()
	if w.n < 2 || w.mean <= 0 {
		return 0
	}
	return math.Sqrt(max(w.m2, 0)/float64(w.n)) / w.mean
}
