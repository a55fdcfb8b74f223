package llmrelay

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/llmrelay/caddy-llm-relay/internal/pace"
	"github.com/llmrelay/caddy-llm-relay/internal/usage"
)

// The status page: the same Status as the JSON view, rendered on the
// server as one HTML document with inline CSS and SVG, and a few lines of
// plain JavaScript that refresh it in place. No external assets: it works
// offline and behind any auth. It holds no secrets: key names, never
// tokens; upstream names, never base URLs or credentials.

// wantsHTML reports whether the client prefers HTML (a browser) to JSON.
func wantsHTML(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		switch strings.TrimSpace(mt) {
		case "text/html", "application/xhtml+xml":
			return true
		case "application/json":
			return false
		}
	}
	return false
}

// The page's own refresh, `?refresh=<seconds>`: the default, and the
// bounds a value is held to. Each refresh renders the whole page on the
// server; one a second is the most a person can read, and a value such as
// 0 (a browser then refetches about 250 times a second) or a word is no
// reason to load the relay.
const (
	defaultPageRefresh = 5 * time.Second
	minPageRefresh     = time.Second
	maxPageRefresh     = time.Hour
)

// pageRefresh is the refresh a page asks for: its `refresh` query value in
// seconds, held within [minPageRefresh, maxPageRefresh]; the default when
// absent or not a number.
func pageRefresh(query string) time.Duration {
	f, err := strconv.ParseFloat(query, 64)
	if err != nil || math.IsNaN(f) {
		return defaultPageRefresh
	}
	if f < minPageRefresh.Seconds() {
		return minPageRefresh
	}
	if f > maxPageRefresh.Seconds() {
		return maxPageRefresh
	}
	return time.Duration(f * float64(time.Second)).Round(time.Millisecond)
}

// statusPageData is what the page's template reads: the status, and the
// page's own refresh.
type statusPageData struct {
	Status
	Refresh time.Duration
}

// writeStatusPage renders the page.
func writeStatusPage(w http.ResponseWriter, r *http.Request) error {
	buf := pageBuffers.Get().(*bytes.Buffer)
	defer pageBuffers.Put(buf)
	buf.Reset()
	page := statusPageData{Status: buildStatus(time.Now()), Refresh: pageRefresh(r.URL.Query().Get("refresh"))}
	if err := renderStatusPage(buf, page); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src 'self'; img-src data:")
	_, err := w.Write(buf.Bytes())
	return err
}

var pageBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func renderStatusPage(buf *bytes.Buffer, page statusPageData) error {
	return statusPage.Execute(buf, page)
}

// The chart geometry, in SVG user units (the SVGs scale to their box).
const (
	timelineWidth = 1000.0
	timelineRow   = 14.0
	sparkWidth    = 90.0
	sparkHeight   = 20.0
)

// timelineRows are the rows of a stream's timeline: the upstream's events
// above, the client's below, reasoning and answer apart.
var timelineRows = []struct {
	label string
	out   bool
	lane  pace.MarkLane
	class string
}{
	{"upstream reasoning", false, pace.LaneReasoning, "r"},
	{"upstream answer", false, pace.LaneAnswer, "a"},
	{"upstream other", false, pace.LaneOther, "o"},
	{"client reasoning", true, pace.LaneReasoning, "r"},
	{"client answer", true, pace.LaneAnswer, "a"},
	{"client other", true, pace.LaneOther, "o"},
	{"heartbeats", true, pace.LaneHeartbeat, "h"},
}

// timelineSVG draws a stream's marks: one short vertical tick per event.
// Each row is one path whose every vertex carries a tick marker, the
// vertices at the events' times ("H<x>" per event, x in thousandths of
// the stream's length): about five bytes an event, so fifty long streams
// keep the page small.
func timelineSVG(s streamView) template.HTML {
	end := 1.0
	for _, m := range s.Marks {
		end = math.Max(end, m[0])
	}
	scale := (timelineWidth - 4) / end
	height := timelineRow * float64(len(timelineRows))
	b := make([]byte, 0, 256+6*len(s.Marks))
	b = fmt.Appendf(b, `<svg class="tl" viewBox="0 0 %g %g" preserveAspectRatio="none" role="img" aria-label="timeline: %d events in, %d out over %s">`,
		timelineWidth, height+12, s.EventsIn, s.EventsOut, fmtMS(end))
	for i, row := range timelineRows {
		y := float64(i)*timelineRow + 7
		if i == 3 {
			b = fmt.Appendf(b, `<line class="sep" x1="0" x2="%g" y1="%g" y2="%g"/>`, timelineWidth, y-7, y-7)
		}
		n := 0
		var path []byte
		var last int64
		for _, m := range s.Marks {
			if (m[1] == 1) != row.out || pace.MarkLane(m[2]) != row.lane {
				continue
			}
			x := int64(2 + m[0]*scale + 0.5)
			if n == 0 {
				path = strconv.AppendInt(append(path, 'M'), x, 10)
				path = strconv.AppendInt(append(path, ' '), int64(y), 10)
			} else {
				path = strconv.AppendInt(append(path, 'h'), x-last, 10) // relative: a digit or two
			}
			last = x
			n++
		}
		b = fmt.Appendf(b, `<path class="m %s" data-row="%d" data-marks="%d" d="%s"/>`, row.class, i, n, path)
	}
	b = fmt.Appendf(b, `<text x="0" y="%g">0</text><text x="%g" y="%g" text-anchor="end">%s</text></svg>`,
		height+11, timelineWidth, height+11, fmtMS(end))
	return template.HTML(b)
}

// sparkSVG draws recent latencies as a polyline.
func sparkSVG(vals []float64) template.HTML {
	if len(vals) < 2 {
		return ""
	}
	hi := 0.0
	for _, v := range vals {
		hi = math.Max(hi, v)
	}
	if hi <= 0 {
		hi = 1
	}
	b := fmt.Appendf(nil, `<svg class="spark" viewBox="0 0 %g %g"><title>up to %s</title><polyline points="`, sparkWidth, sparkHeight, fmtMS(hi))
	step := sparkWidth / float64(len(vals)-1)
	for i, v := range vals {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendInt(b, int64(float64(i)*step+0.5), 10)
		b = strconv.AppendInt(append(b, ','), int64(sparkHeight-1-v/hi*(sparkHeight-2)+0.5), 10)
	}
	return template.HTML(append(b, `"/></svg>`...))
}

// fmtMS formats milliseconds for people: 850ms, 1.2s, 3m4s.
func fmtMS(v float64) string {
	switch {
	case v <= 0:
		return "–"
	case v < 1:
		return strconv.FormatFloat(v, 'f', 2, 64) + "ms"
	case v < 1000:
		return strconv.FormatFloat(v, 'f', 0, 64) + "ms"
	case v < 60_000:
		return strconv.FormatFloat(v/1000, 'f', 1, 64) + "s"
	}
	return (time.Duration(v) * time.Millisecond).Round(time.Second).String()
}

func pct(v float64) string { return strconv.FormatFloat(v*100, 'f', 1, 64) + "%" }

// barWidth is a spend bar's fill in percent of its budget, at most 100.
func barWidth(spent, budget float64) string {
	if budget <= 0 {
		return "0"
	}
	return strconv.FormatFloat(math.Min(spent/budget*100, 100), 'f', 1, 64)
}

var statusPage = template.Must(template.New("status").Funcs(template.FuncMap{
	"timeline": timelineSVG,
	"spark":    sparkSVG,
	"ms":       fmtMS,
	"pct":      pct,
	"bar":      barWidth,
	"inc":      func(i int) int { return i + 1 },
	"deref":    func(b *bool) bool { return b != nil && *b },
	"derefF":   func(f *float64) float64 { return *f },
	"clock":    func(t time.Time) string { return t.UTC().Format("15:04:05") },
	"usd":      usage.FormatUSD,
	"f2":       func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) },
	"f0":       func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) },
	"pctn":     func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) + "%" },
	"when":     func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") },
	"rfc3339":  func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"perM":     perM,
	"urlHost":  urlHost,
	"share":    share,
	"prices":   pagePrices,
}).Parse(statusTemplate + priceTemplates))

const statusTemplate = `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>llm_relay status</title>
<style>
:root{color-scheme:light dark;--bg:#fff;--fg:#1b1f24;--mute:#667085;--line:#d0d7de;--card:#f6f8fa;--ok:#1a7f37;--warn:#9a6700;--bad:#cf222e;--r:#8250df;--a:#0969da;--o:#8c959f;--h:#bf8700}
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--fg:#e6edf3;--mute:#8b949e;--line:#30363d;--card:#161b22;--ok:#3fb950;--warn:#d29922;--bad:#f85149;--r:#bc8cff;--a:#58a6ff;--o:#6e7681;--h:#e3b341}}
body{margin:0;background:var(--bg);color:var(--fg);font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif}
main{max-width:1240px;margin:0 auto;padding:12px 16px 40px}
header{display:flex;flex-wrap:wrap;gap:8px 16px;align-items:baseline;border-bottom:1px solid var(--line);padding-bottom:8px}
h1{font-size:18px;margin:0}h2{font-size:16px;margin:22px 0 8px}h3{font-size:14px;margin:14px 0 4px}
.mute,small{color:var(--mute)}.ok{color:var(--ok)}.warn{color:var(--warn)}.bad{color:var(--bad)}
.scroll{overflow-x:auto}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid var(--line);vertical-align:top;white-space:nowrap}
td.wrap{white-space:normal;min-width:14em}
th{font-weight:600;color:var(--mute);font-size:12px}
.badge{display:inline-block;padding:0 6px;border-radius:9px;font-size:12px;border:1px solid currentColor}
.spark{width:90px;height:20px}.spark polyline{fill:none;stroke:var(--a);stroke-width:1.2}
.barbox{width:160px;height:10px;background:var(--card);border:1px solid var(--line);border-radius:5px;overflow:hidden}
.barbox div{height:100%;background:var(--a)}.barbox.over div{background:var(--bad)}
.stream{background:var(--card);border:1px solid var(--line);border-radius:6px;padding:8px 10px;margin:8px 0}
.stream .figs{display:flex;flex-wrap:wrap;gap:4px 14px;font-size:12px}
.tlwrap{display:grid;grid-template-columns:auto 1fr;gap:0 8px;align-items:start;margin-top:6px}
.labels{font-size:10px;line-height:14px;color:var(--mute);padding-top:1px}
.tl{width:100%;height:110px;display:block}
.tl .m{fill:none;stroke:none}.tl .r{marker:url(#tr)}.tl .a{marker:url(#ta)}.tl .o{marker:url(#to)}.tl .h{marker:url(#th)}
.tk{stroke-width:1.2}#tr .tk{stroke:var(--r)}#ta .tk{stroke:var(--a)}#to .tk{stroke:var(--o)}#th .tk{stroke:var(--h);stroke-width:3}
.tl .sep{stroke:var(--line)}.tl text{font-size:9px;fill:var(--mute)}
.legend span{margin-right:12px;font-size:12px}.legend i{display:inline-block;width:10px;height:3px;margin-right:4px;vertical-align:middle}
@media (max-width:700px){main{padding:8px}th,td{padding:3px 5px}.labels{display:none}.tlwrap{grid-template-columns:1fr}}
</style></head>
<body><svg width="0" height="0" style="position:absolute" aria-hidden="true"><defs>
<marker id="tr" markerUnits="userSpaceOnUse" markerWidth="4" markerHeight="12" refX="2" refY="6" overflow="visible"><path class="tk" d="M2 1v10"/></marker>
<marker id="ta" markerUnits="userSpaceOnUse" markerWidth="4" markerHeight="12" refX="2" refY="6" overflow="visible"><path class="tk" d="M2 1v10"/></marker>
<marker id="to" markerUnits="userSpaceOnUse" markerWidth="4" markerHeight="12" refX="2" refY="6" overflow="visible"><path class="tk" d="M2 1v10"/></marker>
<marker id="th" markerUnits="userSpaceOnUse" markerWidth="4" markerHeight="12" refX="2" refY="6" overflow="visible"><path class="tk" d="M2 1v10"/></marker>
</defs></svg><main id="status">
<header><h1>llm_relay</h1><span class="mute" id="updated">as of {{clock .Time}} UTC</span>
{{with .Resume}}<span id="resume">resume: <b>{{.Journals}}</b> journals ({{.Running}} running, {{.Size}}){{if .Resumed}} · {{.Resumed}} resumed{{end}}{{if .Reattached}} · {{.Reattached}} re-attached{{end}}{{if .Detached}} · {{.Detached}} detached{{end}}{{if .Background}} · {{.Background}} background{{end}}{{if .Cancelled}} · {{.Cancelled}} cancelled{{end}}{{if .Expired}} · {{.Expired}} detach expired{{end}}{{if .Evicted}} · <span class="bad">{{.Evicted}} evicted</span>{{end}}{{if .Refused}} · <span class="bad">{{.Refused}} unjournaled</span>{{end}}</span>{{end}}
{{with .State}}<span>state: <b>{{.Backend}}</b>{{if .Up}}{{if deref .Up}} <span class="ok">up</span>{{else}} <span class="bad">down</span>{{end}}{{end}}{{with .LastError}} <span class="mute" id="state-error">{{.}}</span>{{end}}{{with .Problems}} <a class="bad" href="#shared-state">{{len .}} skipped</a>{{end}}</span>{{end}}
<label class="mute"><input type="checkbox" id="auto" checked> refresh every {{.Refresh}}</label></header>
{{with .State}}{{with .Problems}}
<section id="shared-state"><h2>Shared state: skipped</h2><div class="scroll"><table>
<tr><th>key</th><th>field</th><th>problem</th><th>since</th></tr>
{{range .}}<tr class="problem"><td>{{.Key}}</td><td>{{.Field}}</td><td>{{.What}}</td><td>{{clock .Since}}</td></tr>
{{end}}</table></div></section>{{end}}{{end}}

<section id="chains"><h2>Chains</h2>
{{range .Chains}}<h3>{{.Alias}}{{with .RegionPin}} <span class="badge" title="region_pin: only targets in this region are tried">pinned to {{.}}</span>{{end}}</h3><div class="scroll"><table>
<tr><th>#</th><th>target</th><th>status</th><th>cooldown left</th><th>ttft p50</th><th>ttft p90</th><th>probe rtt</th><th>in flight</th><th>success</th><th>slo</th><th>$/M</th><th>recent ttft</th><th>reason</th></tr>
{{range $i, $t := .Targets}}<tr class="target" data-status="{{.Status}}"><td>{{inc $i}}</td><td>{{.Upstream}} <span class="mute">({{.Model}})</span></td>
<td><span class="badge {{if eq .Status "healthy"}}ok{{else if eq .Status "ejected"}}bad{{else}}warn{{end}}">{{.Status}}</span></td>
<td>{{if .CooldownLeftMS}}{{ms .CooldownLeftMS}}{{end}}</td><td>{{ms .TTFTP50MS}}</td><td>{{ms .TTFTP90MS}}</td><td>{{if .ProbeRTTMS}}{{ms .ProbeRTTMS}}{{end}}</td>
<td class="occupancy">{{if .MaxConcurrent}}{{.InFlight}} <span class="mute">of {{.MaxConcurrent}} ({{pct .Occupancy}})</span>{{end}}</td>
<td>{{if .Samples}}{{pct .SuccessRatio}} <span class="mute">of {{.Samples}}</span>{{else}}<span class="mute">no samples</span>{{end}}</td>
<td>{{if .SLOTTFTMS}}p90 ≤ {{ms .SLOTTFTMS}} {{end}}{{if .SLOSuccess}}≥ {{pct .SLOSuccess}}{{end}}{{if .SLOReasoningFloor}} reasoning ≥ {{share .SLOReasoningFloor}} of baseline{{end}}{{if .SLOClusterRate}} cluster ≤ {{f2 .SLOClusterRate}}{{end}}</td>
{{template "price" .Price}}
<td>{{spark .RecentTTFTMS}}</td><td class="wrap">{{.Reason}}</td></tr>
{{end}}</table></div>{{else}}<p class="mute">No relay loaded.</p>{{end}}</section>
{{template "prices" .}}

<section id="canaries"><h2>Canaries</h2>
{{if .Canaries}}<div class="scroll"><table><tr><th>canary</th><th>state</th><th>share</th><th>phases</th><th>phase ends</th><th>error rate</th><th>ttft p99</th><th>ttft mean</th><th>reasoning cluster</th><th>reasoning vs stable</th><th>window</th><th>rollback reason</th></tr>
{{range .Canaries}}{{$step := .Step}}<tr class="canary" data-state="{{.State}}"><td>{{.Name}}</td><td><span class="badge {{if eq (print .State) "rolled_back"}}bad{{else}}ok{{end}}">{{.State}}</span></td>
<td>{{pctn .Share}}</td><td class="phases">{{range $i, $p := .Phases}}{{if $i}} → {{end}}<span class="phase{{if eq $i $step}} current{{end}}">{{if eq $i $step}}<b>{{end}}{{pctn $p.Share}}{{if $p.For}} for {{$p.For}}{{end}}{{if eq $i $step}}</b>{{end}}</span>{{end}}<div class="mute">phase {{inc .Step}} of {{len .Phases}}</div></td>
<td class="phase-ends"{{if not .NextStepAt.IsZero}} data-ends="{{rfc3339 .NextStepAt}}">{{when .NextStepAt}} UTC{{if .SamplesToStep}}<div class="mute">and {{.SamplesToStep}} more attempt{{if ne .SamplesToStep 1}}s{{end}}</div>{{end}}{{else}}>{{if eq (print .State) "rolled_back"}}<span class="mute">rolled back</span>{{else}}<span class="mute">last phase</span>{{end}}{{end}}</td>
<td>{{pct .ErrorRate}}{{if .GuardErrorRate}} <span class="mute">/ ≤ {{pct .GuardErrorRate}}</span>{{end}}</td>
<td>{{ms .TTFTP99Ms}}{{if .GuardTTFTP99Ms}} <span class="mute">/ ≤ {{ms .GuardTTFTP99Ms}}</span>{{end}}</td>
<td>{{ms .TTFTMeanMs}}{{if .GuardTTFTMeanMs}} <span class="mute">/ ≤ {{ms .GuardTTFTMeanMs}}</span>{{end}}</td>
<td>{{if .ClusterRate}}{{f2 (derefF .ClusterRate)}} <span class="mute">of {{.ClusterSamples}}</span>{{else}}<span class="mute">–</span>{{end}}{{if .GuardClusterRate}} <span class="mute">/ ≤ {{f2 .GuardClusterRate}}</span>{{end}}</td>
<td class="canary-reasoning">{{range .Reasoning}}<div>{{.Effort}}: {{printf "%.0f" .CanaryTokens}} <span class="mute">of {{.CanarySamples}}</span> vs {{printf "%.0f" .StableTokens}} <span class="mute">of {{.StableSamples}}</span>{{if .Ratio}} ({{pct (derefF .Ratio)}}){{end}}</div>{{else}}<span class="mute">–</span>{{end}}{{if .GuardReasoningFloor}} <span class="mute">/ ≥ {{pct .GuardReasoningFloor}}</span>{{end}}</td>
<td>{{.Samples}} <span class="mute">of {{.Window}} (min {{.MinSamples}})</span></td>
<td class="wrap">{{.RollbackReason}}</td></tr>
{{end}}</table></div>{{else}}<p class="mute">None configured.</p>{{end}}
<h3>Shadows</h3>
{{if .Shadows}}<div class="scroll"><table><tr><th>alias</th><th>shadow</th><th>share</th><th>sent</th><th>dropped</th><th>ok</th><th>failed</th><th>mean similarity</th><th>verdict</th><th>reasoning tokens <span class="mute">primary → shadow</span></th><th>cluster rate <span class="mute">primary → shadow</span></th><th>verdict reason</th></tr>
{{range .Shadows}}<tr class="shadow"><td>{{.Alias}}</td><td>{{.Upstream}} <span class="mute">({{.Model}})</span></td><td>{{pctn .Percent}}</td>
<td>{{.Stats.Sent}}</td><td>{{.Stats.Dropped}}</td><td>{{.Stats.OK}}</td><td>{{.Stats.Failed}}</td><td>{{f2 .Stats.MeanSimilarity}}</td>
{{with .Verdict}}<td class="verdict" data-verdict="{{.Verdict}}"><span class="badge {{if eq .Verdict "pass"}}ok{{else if eq .Verdict "fail"}}bad{{else}}warn{{end}}">{{.Verdict}}</span></td>
<td>{{if .Pairs}}{{f0 .PrimaryReasoningTokens}} → {{f0 .ShadowReasoningTokens}} <span class="mute">over {{.Pairs}}</span>{{end}}</td>
<td>{{if or .PrimaryClusterRate .ShadowClusterRate}}{{f2 .PrimaryClusterRate}} → {{f2 .ShadowClusterRate}}{{end}}</td><td class="wrap">{{.Reason}}</td>{{end}}</tr>
{{end}}</table></div>{{else}}<p class="mute">None configured.</p>{{end}}</section>

<section id="keys"><h2>Keys</h2>
{{if .Keys}}<div class="scroll"><table><tr><th>key</th><th>spent this {{"period"}}</th><th>budget</th><th></th><th>rate</th><th>alerts fired</th><th>requests</th><th>expires</th></tr>
{{range .Keys}}<tr class="key" data-key="{{.Key}}"><td>{{.Key}}</td><td>{{usd .SpentUSD}}{{if .OthersUSD}} <span class="mute">({{usd .OthersUSD}} elsewhere)</span>{{end}}</td>
<td>{{if .BudgetUSD}}{{.Budget}}{{else}}<span class="mute">none</span>{{end}}</td>
<td>{{if .BudgetUSD}}<div class="barbox{{if .Blocked}} over{{end}}" title="{{.Spent}} of {{.Budget}}"><div style="width:{{bar .SpentUSD .BudgetUSD}}%"></div></div>{{end}}</td>
<td>{{usd .USDPerHour}}/h</td><td>{{range $i, $a := .Alerts}}{{if $i}}, {{end}}{{$a}}%{{else}}<span class="mute">none</span>{{end}}</td><td>{{.Requests}}</td><td>{{if not .Expires.IsZero}}<span class="{{if .ExpiresSoon}}warn{{else}}mute{{end}}">{{.Expires.UTC.Format "2006-01-02"}}</span>{{end}}</td></tr>
{{end}}</table></div>{{else}}<p class="mute">No keys.</p>{{end}}</section>

<section id="streams"><h2>Recent streams</h2>
<p class="legend mute"><span><i style="background:var(--r)"></i>reasoning</span><span><i style="background:var(--a)"></i>answer</span><span><i style="background:var(--o)"></i>other</span><span><i style="background:var(--h)"></i>heartbeat</span> one stroke per event; upstream arrivals above the line, what the client was sent below.</p>
{{range .Streams}}<div class="stream" data-events-in="{{.EventsIn}}" data-events-out="{{.EventsOut}}" data-mode="{{.Mode}}">
<div><b>{{.Alias}}</b> → {{.Upstream}} <span class="mute">({{.Model}})</span> · mode <b>{{.Mode}}</b> · {{clock .At}} UTC · key {{.Key}}</div>
<div class="figs mute"><span>events {{.EventsIn}} in / {{.EventsOut}} out</span><span>rate CV {{f2 .RateCVIn}} → {{f2 .RateCVOut}}</span><span>gap p99 {{ms .GapP99MS}}</span><span>lag p99 {{ms .LagP99MS}}</span><span>tail {{ms .TailMS}}</span>{{if .ReasoningClusterIn}}<span>reasoning cluster {{f2 (derefF .ReasoningClusterIn)}} → {{f2 (derefF .ReasoningClusterOut)}}</span>{{end}}{{if .Heartbeats}}<span>{{.Heartbeats}} heartbeats</span>{{end}}{{if .Dropped}}<span>{{.Dropped}} marks not kept</span>{{end}}</div>
{{with .Handoff}}<div class="handoff figs mute"><span>hand-off: {{if .ReasonUpstream}}reasoned by {{.ReasonUpstream}} ({{.ReasonModel}}), ttft {{ms .ReasonTTFTMS}}, ~{{.ReasoningTokens}} tokens, handed off at {{ms .HandoffAtMS}} ({{.Why}}), gap {{ms .GapMS}}{{else}}no reasoning{{end}}</span>{{if .AnswerUpstream}}<span>answered by {{.AnswerUpstream}} ({{.AnswerModel}}), ttft {{ms .AnswerTTFTMS}}</span>{{end}}</div>{{end}}
<div class="tlwrap"><div class="labels">upstream reasoning<br>upstream answer<br>upstream other<br>client reasoning<br>client answer<br>client other<br>heartbeats</div>{{timeline .}}</div></div>
{{else}}<p class="mute">No streams yet.</p>{{end}}</section>

<section id="failovers"><h2>Recent failovers</h2>
{{if .Failovers}}<div class="scroll"><table><tr><th>at</th><th>alias</th><th>key</th><th>status</th><th>attempts</th></tr>
{{range .Failovers}}<tr class="failover"><td>{{clock .At}}</td><td>{{.Alias}}</td><td>{{.Key}}</td><td>{{.Status}}</td>
<td class="wrap">{{range $i, $a := .Attempts}}{{if $i}} → {{end}}<span class="attempt">{{$a.Target}}: {{$a.Outcome}} <span class="mute">@{{ms $a.AtMS}}</span></span>{{end}}</td></tr>
{{end}}</table></div>{{else}}<p class="mute">None yet.</p>{{end}}</section>
</main>
<script>
(function(){
  var box=document.getElementById('auto');
  function refresh(){
    if(!box.checked){return}
    fetch(location.href,{headers:{Accept:'text/html'},cache:'no-store'}).then(function(r){return r.text()}).then(function(t){
      var doc=new DOMParser().parseFromString(t,'text/html');
      var fresh=doc.getElementById('status');
      if(!fresh){return}
      var on=box.checked;
      document.getElementById('status').replaceWith(fresh);
      box=document.getElementById('auto');box.checked=on;
      document.body.dataset.refreshes=String((+document.body.dataset.refreshes||0)+1);
    }).catch(function(){});
  }
  setInterval(refresh,{{.Refresh.Milliseconds}});
})();
</script>
</body></html>
`
