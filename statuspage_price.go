package llmrelay

import (
	"math"
	"net/url"
	"slices"
	"strconv"
)

// The status page's prices (issue 29, section 5): each chain's target
// rows say the price that applies (input / output, USD per million
// tokens) and whence, in a few bytes; the Prices section below the chains
// lists each distinct price once, with its cached-input and cache-write
// figures and, for a built-in one, the page it was read from (a link) and
// the date. The page stays small with 100 targets: a source URL is
// written once, not once per target.

// pagePrice is one row of the Prices section: a price and the target
// models it applies to.
type pagePrice struct {
	priceInfo
	Models []string
}

// pagePrices are the distinct priced (config or built-in) prices of the
// chains' targets, in the order first met.
func pagePrices(chains []chainView) []pagePrice {
	var out []pagePrice
	for _, c := range chains {
		for _, l := range c.Targets {
			if l.Price == nil || (l.Price.From != priceConfig && l.Price.From != priceBuiltin) {
				continue
			}
			i := slices.IndexFunc(out, func(p pagePrice) bool { return p.priceInfo == *l.Price })
			if i < 0 {
				out = append(out, pagePrice{priceInfo: *l.Price})
				i = len(out) - 1
			}
			if !slices.Contains(out[i].Models, l.Model) {
				out[i].Models = append(out[i].Models, l.Model)
			}
		}
	}
	return out
}

// perM formats USD per million tokens as short as exact: $1.25, $10,
// $0.025.
func perM(v float64) string { return "$" + strconv.FormatFloat(v, 'f', -1, 64) }

// urlHost is a source link's text: the URL's host, or "source".
func urlHost(s string) string {
	if u, err := url.Parse(s); err == nil && u.Host != "" {
		return u.Host
	}
	return "source"
}

// share formats a ratio as a percentage to a tenth, without trailing
// zeros: 0.5 is 50%, 0.075 is 7.5%.
func share(v float64) string {
	return strconv.FormatFloat(math.Round(v*1000)/10, 'f', -1, 64) + "%"
}

// priceTemplates: "price" is a target row's price cell, "prices" the
// Prices section.
const priceTemplates = `{{define "price"}}{{with .}}<td{{if or .CachedInput .CacheWrite}} title="{{with .CachedInput}}cached {{perM .}}{{end}}{{if and .CachedInput .CacheWrite}}, {{end}}{{with .CacheWrite}}write {{perM .}}{{end}}"{{end}}>
{{- if eq .From "none"}}<small>unpriced</small>
{{- else if eq .From "per_request"}}<small>client’s model</small>
{{- else}}{{perM .Input}} / {{perM .Output}} <small>{{if eq .From "builtin"}}built-in{{else}}config: {{.Match}}{{end}}</small>{{end}}</td>
{{- else}}<td></td>{{end}}{{end}}
{{define "prices"}}{{with prices .Chains}}<section id="prices"><h2>Prices</h2><p class="mute">USD per million tokens (a target's is in its chain's $/M column).</p><div class="scroll"><table>
<tr><th>price</th><th>models</th><th>input</th><th>output</th><th>cached input</th><th>cache write</th><th>from</th></tr>
{{range .}}<tr class="price" data-from="{{.From}}"><td>{{.Match}}</td><td class="wrap">{{range $i, $m := .Models}}{{if $i}}, {{end}}{{$m}}{{end}}</td><td>{{perM .Input}}</td><td>{{perM .Output}}</td>
<td>{{if .CachedInput}}{{perM .CachedInput}}{{else}}<span class="mute">as input</span>{{end}}</td><td>{{if .CacheWrite}}{{perM .CacheWrite}}{{else}}<span class="mute">as input</span>{{end}}</td>
<td>{{if eq .From "builtin"}}built-in{{with .Source}}, <a href="{{.}}" rel="noreferrer">{{urlHost .}}</a>{{end}}{{with .Taken}}, taken {{.}}{{end}}{{else}}config: price {{.Match}}{{end}}</td></tr>
{{end}}</table></div></section>{{end}}{{end}}`
