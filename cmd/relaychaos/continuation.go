package main

import (
	"strings"

	"github.com/llmrelay/caddy-llm-relay/internal/chaos"
)

// responsesExact: whether the Responses continuation cases must show the
// client exactly chaos.ContAnswer. False while the Responses splice is
// internal/splice's pass-through stub; the cases still must not hang,
// truncate silently or send a malformed stream.
const responsesExact = true

// contCases are the continuation cases (issue 30): chains of faulty
// upstreams that break their streams after the commit point at random
// points (chaos.ContDrop, ContError, ContStall), with `after_commit
// continue`, in each client dialect. Every upstream of a chain writes
// the same answer, continuing the answer so far it is sent, so a stream
// that ends well must show exactly chaos.ContAnswer, however many seams
// it has. The targets are on three upstreams of the misbehaving server:
// conta and contc are asked to continue with the relay's instruction
// (the default for a Chat upstream), contb with a prefill.
func contCases() []chaosCase {
	const failover = "failover {\n\t\t\t\tafter_commit continue\n\t\t\t}"
	// Each case's targets are its own ("@{case}" becomes its name): the
	// misbehaving upstream never breaks twice in a row for one of them.
	to := func(up string, b chaos.Behaviour) string { return "to " + up + " " + string(b) + "@{case}" }
	good := to("contc", chaos.ContGood)
	chains := []struct {
		name, chain string
		complete    bool // the chain ends with a whole answer
		about       string
	}{
		{"cont-drop", lines(to("conta", chaos.ContDrop), to("contb", chaos.ContDrop), good, failover), true,
			"drops at random points, twice, then a whole answer: continued"},
		{"cont-error", lines(to("conta", chaos.ContError), to("contb", chaos.ContError), good, failover), true,
			"mid-stream server error events at random points, twice, then a whole answer: continued"},
		{"cont-stall", lines(to("conta", chaos.ContStall), to("contb", chaos.ContDrop), good, failover), true,
			"a stall past stream_idle_timeout, then a drop, at random points, then a whole answer: continued"},
		{"cont-exhaust", lines(to("conta", chaos.ContDrop), to("contb", chaos.ContError), failover), false,
			"a drop, then an error event, at random points, and no third target: continued or an in-band error"},
		{"cont-refused", lines(to("conta", chaos.ContError), to("contb", chaos.ContDrop), "to dead", failover), false,
			"an error event, then a drop, at random points, then a target on a closed port: continued or an in-band error"},
		{"cont-fail", lines(to("conta", chaos.ContError), to("contb", chaos.ContFail), failover), false,
			"an error event at a random point, then a target whose stream is only an error event: an in-band error, whole"},
	}
	var out []chaosCase
	for _, d := range []struct {
		dialect chaos.Dialect
		path    string
	}{{chaos.DialectChat, "chat/completions"}, {chaos.DialectMessages, "messages"}, {chaos.DialectResponses, "responses"}} {
		for _, ch := range chains {
			name := ch.name + "-" + string(d.dialect)
			out = append(out, chaosCase{
				name: name, path: d.path, chain: strings.ReplaceAll(ch.chain, "{case}", name),
				dialect: d.dialect, streamOnly: true,
				want:  chaos.Want{Complete: ch.complete, Text: chaos.ContAnswer, Exact: d.dialect != chaos.DialectResponses || responsesExact},
				about: string(d.dialect) + " client: " + ch.about,
			})
		}
	}
	return out
}
