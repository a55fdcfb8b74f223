package splice

import "github.com/llmrelay/caddy-llm-relay/internal/sse"

// STUB until the dialects land: forwards everything, and its seam's
// splicer forwards the continuation unchanged.
type passRecorder struct{ out []sse.Event }

func newPassRecorder() *passRecorder { return &passRecorder{} }

func (p *passRecorder) Pass(ev sse.Event) []sse.Event { p.out = append(p.out[:0], ev); return p.out }
func (p *passRecorder) Overflow() bool                { return false }
func (p *passRecorder) Release()                      {}
func (p *passRecorder) Seam() *Seam {
	return &Seam{splicer: func(Options) Splicer { return &passSplicer{} }}
}

type passSplicer struct{ out []sse.Event }

func (p *passSplicer) Next(ev sse.Event) []sse.Event { p.out = append(p.out[:0], ev); return p.out }
