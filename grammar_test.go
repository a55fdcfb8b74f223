package llmrelay

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// The llm_relay grammar is stated once, in the README's Caddyfile section.
// These tests hold it to what the parser (caddyfile.go) accepts, learnt
// from the parser itself: every word that appears as a string in the
// package's source is fed to every block, and a word the block does not
// turn away with its "unrecognized ... subdirective" error is one it
// accepts. So a subdirective added to the parser and not to the README
// (or the other way round) fails here, and so does an "expected ..." list
// that names one a block does not accept or leaves one out.

// grammarBlock is one block of the grammar: its path in the README's
// tree, the name its "unrecognized <name> subdirective" error gives, and
// a Caddyfile that puts a line (%s) in it.
type grammarBlock struct {
	path, name, caddyfile string
}

var grammarBlocks = []grammarBlock{
	{"llm_relay", "llm_relay", "llm_relay {\n%s\n}"},
	{"llm_relay/key", "key", "llm_relay {\nkey tok name {\n%s\n}\n}"},
	{"llm_relay/upstream", "upstream", "llm_relay {\nupstream u http://127.0.0.1/v1 {\n%s\n}\n}"},
	{"llm_relay/upstream/health_check", "health_check", "llm_relay {\nupstream u http://127.0.0.1/v1 {\nhealth_check {\n%s\n}\n}\n}"},
	{"llm_relay/model", "model", "llm_relay {\nupstream u http://127.0.0.1/v1\nmodel m {\nto u\n%s\n}\n}"},
	{"llm_relay/model/to", "target", "llm_relay {\nupstream u http://127.0.0.1/v1\nmodel m {\nto u {\n%s\n}\n}\n}"},
	{"llm_relay/model/handoff", "handoff", "llm_relay {\nupstream u http://127.0.0.1/v1\nmodel m {\nreason u\nto u\nhandoff {\n%s\n}\n}\n}"},
	{"llm_relay/model/slo", "slo", "llm_relay {\nupstream u http://127.0.0.1/v1\nmodel m {\nto u\nslo {\n%s\n}\n}\n}"},
	{"llm_relay/model/canary", "canary", "llm_relay {\nupstream u http://127.0.0.1/v1\nmodel m {\nto u\ncanary u 10 {\n%s\n}\n}\n}"},
	{"llm_relay/model/canary/guard", "guard", "llm_relay {\nupstream u http://127.0.0.1/v1\nmodel m {\nto u\ncanary u 10 {\nguard {\n%s\n}\n}\n}\n}"},
	{"llm_relay/model/shadow", "shadow", "llm_relay {\nupstream u http://127.0.0.1/v1\nmodel m {\nto u\nshadow u 10 {\n%s\n}\n}\n}"},
	{"llm_relay/model/smoothing", "smoothing", "llm_relay {\nupstream u http://127.0.0.1/v1\nmodel m {\nto u\nsmoothing {\n%s\n}\n}\n}"},
	{"llm_relay/model/failover", "failover", "llm_relay {\nupstream u http://127.0.0.1/v1\nmodel m {\nto u\nfailover {\n%s\n}\n}\n}"},
	{"llm_relay/model/adaptive_effort", "adaptive_effort", "llm_relay {\nupstream u http://127.0.0.1/v1\nmodel m {\nto u\nadaptive_effort {\n%s\n}\n}\n}"},
	{"llm_relay/adaptive_effort", "adaptive_effort", "llm_relay {\nadaptive_effort {\n%s\n}\n}"},
	{"llm_relay/price", "price", "llm_relay {\nprice m {\n%s\n}\n}"},
	{"llm_relay/slo", "slo", "llm_relay {\nslo {\n%s\n}\n}"},
	{"llm_relay/failover", "failover", "llm_relay {\nfailover {\n%s\n}\n}"},
	{"llm_relay/smoothing", "smoothing", "llm_relay {\nsmoothing {\n%s\n}\n}"},
	{"llm_relay/capacity", "capacity", "llm_relay {\ncapacity {\n%s\n}\n}"},
	{"llm_relay/capacity/degrade", "degrade", "llm_relay {\ncapacity {\ndegrade {\n%s\n}\n}\n}"},
	{"llm_relay/state", "state redis", "llm_relay {\nstate redis 127.0.0.1:6379 {\n%s\n}\n}"},
	{"llm_relay/resume", "resume", "llm_relay {\nresume {\n%s\n}\n}"},
}

// grammar is the README's grammar as a tree of directive words.
type grammar struct {
	children map[string][]string // path -> its subdirectives, in order
	elided   map[string]bool     // path written `{ ... }`: its block is stated elsewhere
	lines    map[string]int      // path -> its first line in the README
}

// block gives the subdirectives of the block at path, and whether the
// README states them: a block elided as `{ ... }` is the relay level's
// block of the same name (slo, smoothing, adaptive_effort in a model),
// and one with none there is another module's (transport).
func (g grammar) block(path string) ([]string, bool) {
	if !g.elided[path] {
		c, ok := g.children[path]
		return c, ok
	}
	top := "llm_relay/" + path[strings.LastIndexByte(path, '/')+1:]
	if g.elided[top] {
		return nil, false
	}
	c, ok := g.children[top]
	return c, ok
}

// readmeGrammar reads the grammar from the README's "## Caddyfile"
// section: its first fenced block.
func readmeGrammar(t *testing.T) grammar {
	t.Helper()
	doc, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Caddyfile\n")
	if !ok {
		t.Fatal("README.md has no ## Caddyfile section")
	}
	lineOffset := strings.Count(string(doc[:len(doc)-len(section)]), "\n")
	_, block, ok := strings.Cut(section, "```text\n")
	if !ok {
		t.Fatal("README.md's Caddyfile section has no ```text block")
	}
	lineOffset += strings.Count(section[:len(section)-len(block)], "\n")
	block, _, _ = strings.Cut(block, "```")

	g := grammar{children: map[string][]string{}, elided: map[string]bool{}, lines: map[string]int{}}
	comment := regexp.MustCompile(`\s#.*$`)
	var stack []string
	for i, line := range strings.Split(block, "\n") {
		line = strings.TrimSpace(comment.ReplaceAllString(line, ""))
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "}") { // } or }]
			if len(stack) == 0 {
				t.Fatalf("README.md:%d: a } closes nothing", lineOffset+i+1)
			}
			stack = stack[:len(stack)-1]
			continue
		}
		word := strings.Fields(line)[0]
		path := word
		if len(stack) > 0 {
			parent := strings.Join(stack, "/")
			path = parent + "/" + word
			if !slices.Contains(g.children[parent], word) {
				g.children[parent] = append(g.children[parent], word)
			}
		} else if word != "llm_relay" {
			t.Fatalf("README.md:%d: the grammar starts with %q, not llm_relay", lineOffset+i+1, word)
		}
		if _, ok := g.lines[path]; !ok {
			g.lines[path] = lineOffset + i + 1
		}
		switch {
		case strings.HasSuffix(line, "{ ... }"):
			g.elided[path] = true
		case strings.HasSuffix(line, "{"): // also `[{`
			stack = append(stack, word)
			if g.children[path] == nil {
				g.children[path] = []string{}
			}
		}
	}
	if len(stack) != 0 {
		t.Fatalf("README.md's grammar leaves %v open", stack)
	}
	return g
}

// sourceWords are the strings of the package's (non-test) source that
// could be directive words: every subdirective the parser compares a
// token with is among them.
func sourceWords(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	word := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	set := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && word.MatchString(s) {
					set[s] = true
				}
			}
			return true
		})
	}
	if len(set) < 100 {
		t.Fatalf("only %d candidate words in the source", len(set))
	}
	return slices.Sorted(maps.Keys(set))
}

// feed parses the block's Caddyfile with line in it.
func (b grammarBlock) feed(line string) error {
	r := new(Relay)
	return r.UnmarshalCaddyfile(caddyfile.NewTestDispenser(fmt.Sprintf(b.caddyfile, line)))
}

// accepts reports whether the block takes word as a subdirective: its
// line (with one argument, as most take) gets any answer but the block's
// "unrecognized" error.
func (b grammarBlock) accepts(word string) bool {
	err := b.feed(word + " 1")
	return err == nil || !strings.Contains(err.Error(), fmt.Sprintf("unrecognized %s subdirective %q", b.name, word))
}

// expected is the list the block's "unrecognized" error offers.
func (b grammarBlock) expected(t *testing.T) []string {
	t.Helper()
	const unknown = "no_such_subdirective"
	err := b.feed(unknown + " 1")
	prefix := fmt.Sprintf("unrecognized %s subdirective %q; expected ", b.name, unknown)
	if err == nil || !strings.Contains(err.Error(), prefix) {
		t.Fatalf("%s: an unknown subdirective gets %v, not %q...", b.path, err, prefix)
	}
	list := err.Error()[strings.Index(err.Error(), prefix)+len(prefix):]
	list, _, _ = strings.Cut(list, ", at ")
	var out []string
	for _, part := range strings.Split(list, ", ") {
		for w := range strings.SplitSeq(part, " or ") {
			out = append(out, strings.TrimSpace(w))
		}
	}
	return out
}

// TestCaddyfileGrammar: every block of the README's grammar lists exactly
// the subdirectives the parser accepts there, and its "unrecognized"
// error offers exactly those.
func TestCaddyfileGrammar(t *testing.T) {
	g := readmeGrammar(t)
	candidates := map[string]bool{}
	for _, w := range sourceWords(t) {
		candidates[w] = true
	}
	for _, ws := range g.children { // so that a word only the README has is tried too
		for _, w := range ws {
			candidates[w] = true
		}
	}

	covered := map[string]bool{}
	for _, b := range grammarBlocks {
		covered[b.path] = true
		t.Run(strings.ReplaceAll(b.path, "/", ">"), func(t *testing.T) {
			var accepted []string
			for _, w := range slices.Sorted(maps.Keys(candidates)) {
				if b.accepts(w) {
					accepted = append(accepted, w)
				}
			}
			if len(accepted) == 0 {
				t.Fatalf("accepts nothing: is %q the block's Caddyfile?", b.caddyfile)
			}
			listed, ok := g.block(b.path)
			if !ok {
				t.Fatalf("the README's grammar has no block %s", b.path)
			}
			for _, w := range accepted {
				if !slices.Contains(listed, w) {
					t.Errorf("the parser accepts %s in %s; the README's grammar (line %d) does not list it", w, b.path, g.lines[b.path])
				}
			}
			for _, w := range listed {
				if !slices.Contains(accepted, w) {
					t.Errorf("the README's grammar lists %s in %s (line %d); the parser does not accept it", w, b.path, g.lines[b.path+"/"+w])
				}
			}
			expected := b.expected(t)
			for _, w := range accepted {
				if !slices.Contains(expected, w) {
					t.Errorf("the parser accepts %s in %s; its \"unrecognized %s subdirective\" error does not offer it (it offers %v)", w, b.path, b.name, expected)
				}
			}
			for _, w := range expected {
				if !slices.Contains(accepted, w) {
					t.Errorf("the \"unrecognized %s subdirective\" error offers %s; %s does not accept it", b.name, w, b.path)
				}
			}
		})
	}

	// Every block is tried: each of the README's (but another module's,
	// such as transport's), and each the parser names in an
	// "unrecognized" error.
	for path := range g.children {
		if !covered[path] {
			t.Errorf("the README's grammar has a block %s (line %d) that grammarBlocks does not try", path, g.lines[path])
		}
	}
	for path := range g.elided {
		if _, ok := g.block(path); ok && !covered[path] {
			t.Errorf("the README's grammar has a block %s (line %d) that grammarBlocks does not try", path, g.lines[path])
		}
	}
	src, err := os.ReadFile("caddyfile.go")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, b := range grammarBlocks {
		names[b.name] = true
	}
	for _, m := range regexp.MustCompile(`unrecognized ([a-z_ ]+) subdirective`).FindAllSubmatch(src, -1) {
		if !names[string(m[1])] {
			t.Errorf("caddyfile.go has a block %q (its \"unrecognized\" error) that grammarBlocks does not try", m[1])
		}
	}
}

// TestGrammarWrittenOnce: no comment in the package's source copies a
// block of the grammar (a code line opening one of its directives'
// blocks, as the UnmarshalCaddyfile doc and config.go's types had, and
// which drifted from the parser); they point to the README instead.
func TestGrammarWrittenOnce(t *testing.T) {
	g := readmeGrammar(t)
	directives := map[string]bool{}
	for path := range g.lines {
		directives[path[strings.LastIndexByte(path, '/')+1:]] = true
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(string(src), "\n") {
			code, ok := strings.CutPrefix(strings.TrimLeft(line, "\t"), "//\t")
			if !ok {
				continue
			}
			fields := strings.Fields(code)
			if len(fields) > 0 && directives[fields[0]] && strings.HasSuffix(strings.TrimSpace(code), "{") {
				t.Errorf("%s:%d: a copy of the grammar's %s block; point to README.md#caddyfile instead", f, n+1, fields[0])
			}
		}
	}
}
