package llmrelay

import (
	"fmt"
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmrelay/caddy-llm-relay/internal/thinktag"
)

// The values of reasoning_format.
const (
	formatFields = "fields"
	formatTags   = "tags"
	formatAuto   = "auto"
)

// endMarkerQwen35 names thinktag.Qwen35ToolCall in reasoning_end_marker:
// its newline cannot be written in a Caddyfile token.
const endMarkerQwen35 = "qwen3.5"

// over is r with every setting o makes replacing r's: a target's settings
// over its upstream's. A target's format is its model's, whatever its
// upstream's: with `fields` the upstream's tag settings do not apply (its
// content is not read), and tag settings of its own without a format
// imply tags over an upstream's `fields`, as they would alone.
func (r InlineReasoning) over(o InlineReasoning) InlineReasoning {
	switch {
	case o.Format == formatFields:
		return o
	case o.Format == "" && o.tagged() && r.Format == formatFields:
		r.Format = ""
	}
	if o.Format != "" {
		r.Format = o.Format
	}
	if o.Tags != nil {
		r.Tags = o.Tags
	}
	if o.StartsInReasoning != nil {
		r.StartsInReasoning = o.StartsInReasoning
	}
	if o.EndMarkers != nil {
		r.EndMarkers = o.EndMarkers
	}
	return r
}

// syntax is the parser's syntax r asks for, nil when reasoning comes in
// fields (the default) and content is left alone.
func (r InlineReasoning) syntax() (*thinktag.Syntax, error) {
	switch r.format() {
	case formatFields:
		if r.Format == formatFields && r.tagged() {
			return nil, fmt.Errorf("reasoning_tags, starts_in_reasoning and reasoning_end_marker need `reasoning_format tags` or `auto`: with fields, content is not read for tags")
		}
		return nil, nil
	case formatTags, formatAuto:
	default:
		return nil, fmt.Errorf("reasoning_format %q is not known; use fields (reasoning in a field: the default), tags (inline <think> blocks anywhere in content) or auto (a block only at the start of the answer)", r.Format)
	}
	cfg := thinktag.Config{AtStart: r.format() == formatAuto}
	if r.StartsInReasoning != nil {
		cfg.StartsInReasoning = *r.StartsInReasoning
	}
	for _, t := range r.Tags {
		cfg.Tags = append(cfg.Tags, thinktag.Tag{Open: t.Open, Close: t.Close})
	}
	for _, m := range r.EndMarkers {
		if m == endMarkerQwen35 {
			m = thinktag.Qwen35ToolCall
		}
		cfg.EndMarkers = append(cfg.EndMarkers, m)
	}
	syn, err := thinktag.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("reasoning_tags: %w", err)
	}
	return syn, nil
}

// tagged reports whether r sets anything only tags use.
func (r InlineReasoning) tagged() bool {
	return r.Tags != nil || r.StartsInReasoning != nil || r.EndMarkers != nil
}

// format is r's reasoning_format: as given; else tags when r sets
// something only tags use (starts_in_reasoning alone means the model
// writes tags); else fields.
func (r InlineReasoning) format() string {
	switch {
	case r.Format != "":
		return r.Format
	case r.tagged():
		return formatTags
	}
	return formatFields
}

// check validates r, for both config forms.
func (r InlineReasoning) check() error {
	_, err := r.syntax()
	return err
}

// parseInlineReasoning parses one reasoning_format, reasoning_tags,
// starts_in_reasoning or reasoning_end_marker line (the dispenser on its
// first token) into r, and checks r as it stands, so that an error names
// the line. ok is false when the line is none of these.
func parseInlineReasoning(d *caddyfile.Dispenser, r *InlineReasoning) (ok bool, err error) {
	switch d.Val() {
	case "reasoning_format":
		if r.Format != "" {
			return true, d.Err("reasoning_format is already specified")
		}
		if !d.NextArg() {
			return true, d.Err("reasoning_format: expected `reasoning_format fields|tags|auto`")
		}
		r.Format = d.Val()
	case "reasoning_tags":
		var open, close string
		if !d.Args(&open, &close) {
			return true, d.Err("reasoning_tags: expected `reasoning_tags <open> <close>`, e.g. `reasoning_tags <think> </think>`")
		}
		r.Tags = append(r.Tags, ReasoningTag{Open: open, Close: close})
	case "starts_in_reasoning":
		v := true
		if d.NextArg() {
			b, perr := strconv.ParseBool(d.Val())
			if perr != nil {
				return true, d.Errf("starts_in_reasoning: %q is not true or false", d.Val())
			}
			v = b
		}
		r.StartsInReasoning = &v
	case "reasoning_end_marker":
		if !d.NextArg() {
			return true, d.Err("reasoning_end_marker: expected `reasoning_end_marker <text>` or `reasoning_end_marker qwen3.5`")
		}
		r.EndMarkers = append(r.EndMarkers, d.Val())
	default:
		return false, nil
	}
	if d.NextArg() {
		return true, d.ArgErr()
	}
	if _, err := r.syntax(); err != nil {
		return true, d.Err(err.Error())
	}
	return true, nil
}
