package llmrelay

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// Every Caddyfile snippet in the README and docs/*.md is as `caddy fmt`
// writes it, so operators can paste one into a formatted Caddyfile
// unchanged. (Syntax summaries with <placeholders> are fenced as text.)
func TestReadmeSnippetsAreFormatted(t *testing.T) {
	total := 0
	for _, file := range docFiles(t) {
		doc, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		blocks := regexp.MustCompile("(?s)```caddyfile\n(.*?)```").FindAllSubmatch(doc, -1)
		total += len(blocks)
		for i, b := range blocks {
			if got := caddyfile.Format(b[1]); !bytes.Equal(got, b[1]) {
				t.Errorf("%s: snippet %d is not caddy fmt clean; caddy fmt gives:\n%s", file, i+1, got)
			}
		}
	}
	if total == 0 {
		t.Fatal("no caddyfile snippets found")
	}
}

// docFiles is the README and every page under docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no docs/*.md pages found")
	}
	return append([]string{"README.md"}, pages...)
}

// TestDocsLinksResolve: every relative link in the README and docs/*.md
// names a file that exists, and every #anchor (in the same file or in
// another .md file) names one of that file's headings, as GitHub makes
// them.
func TestDocsLinksResolve(t *testing.T) {
	anchors := map[string]map[string]bool{} // cleaned path -> anchors
	anchorsOf := func(file string) map[string]bool {
		if a, ok := anchors[file]; ok {
			return a
		}
		doc, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		a := headingAnchors(string(doc))
		anchors[file] = a
		return a
	}
	link := regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)
	checked := 0
	for _, file := range docFiles(t) {
		doc, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(withoutCode(string(doc)), "\n") {
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				path, anchor, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.Clean(filepath.Join(filepath.Dir(file), path))
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s:%d: link %q: %s does not exist", file, n+1, target, dest)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s:%d: link %q: an anchor into a file that is not markdown", file, n+1, target)
					continue
				}
				if !anchorsOf(dest)[anchor] {
					t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s", file, n+1, target, dest, anchor)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative links found")
	}
}

// withoutCode blanks fenced code blocks and inline code spans (keeping the
// line count), where brackets are not links.
func withoutCode(doc string) string {
	lines := strings.Split(withoutFences(doc), "\n")
	for i, l := range lines {
		lines[i] = regexp.MustCompile("`[^`]*`").ReplaceAllString(l, "``")
	}
	return strings.Join(lines, "\n")
}

// withoutFences blanks fenced code blocks, keeping the line count.
func withoutFences(doc string) string {
	lines := strings.Split(doc, "\n")
	fence := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fence = !fence
			lines[i] = ""
		} else if fence {
			lines[i] = ""
		}
	}
	return strings.Join(lines, "\n")
}

// headingAnchors gives the anchors GitHub makes of a markdown file's
// headings: lowercased, punctuation other than '-' and spaces dropped,
// spaces turned into '-', and "-1", "-2"... added to repeats.
func headingAnchors(doc string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range strings.Split(withoutFences(doc), "\n") {
		text, ok := strings.CutPrefix(line, "#")
		if !ok {
			continue
		}
		text = strings.TrimLeft(text, "#")
		if !strings.HasPrefix(text, " ") {
			continue
		}
		a := githubAnchor(strings.TrimSpace(text))
		if n := seen[a]; n > 0 {
			anchors[a+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// The demo runs with no keys: it must listen on loopback only, never on
// every interface of the machine it is tried on.
func TestDemoListensOnLoopbackOnly(t *testing.T) {
	src, err := os.ReadFile("examples/demo.Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	listens := regexp.MustCompile(`"listen":\[[^\]]*\]`).FindAllString(string(out), -1)
	if len(listens) == 0 {
		t.Fatal("no listen addresses in the adapted demo")
	}
	for _, l := range listens {
		if !regexp.MustCompile(`^"listen":\["127\.0\.0\.1:\d+"\]$`).MatchString(l) {
			t.Errorf("demo listens on %s; want 127.0.0.1 only (bind 127.0.0.1)", l)
		}
	}
}
