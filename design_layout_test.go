package llmrelay

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDesignLayout: docs/design.md's layout lists every file of the root
// package and every package of the module, each on its own line with its
// concern (`name`: concern), and nothing that is gone. A new file or
// package fails here until it has its line.
func TestDesignLayout(t *testing.T) {
	doc, err := os.ReadFile("docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	_, layout, ok := strings.Cut(string(doc), "\n- **Layout.**")
	if !ok {
		t.Fatal("docs/design.md has no - **Layout.** note")
	}
	layout, _, _ = strings.Cut(layout, "\n- **")
	listed := map[string]string{} // name -> its concern
	for _, m := range regexp.MustCompile("(?m)^ +- `([^`]+)`:(.*)$").FindAllStringSubmatch(layout, -1) {
		if _, dup := listed[m[1]]; dup {
			t.Errorf("docs/design.md's layout lists %s twice", m[1])
		}
		listed[m[1]] = strings.TrimSpace(m[2])
	}

	want := map[string]bool{} // root files and package directories
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			want[f] = true
		}
	}
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if dir := filepath.Dir(path); !d.IsDir() && dir != "." && strings.HasSuffix(path, ".go") {
			want[filepath.ToSlash(dir)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, must := range []string{"relay.go", "internal/pace", "cmd/caddy"} {
		if !want[must] {
			t.Fatalf("found no %s: is the test run from the module's root?", must)
		}
	}

	for name := range want {
		concern, ok := listed[name]
		switch {
		case !ok:
			t.Errorf("docs/design.md's layout does not list %s: add a line \"- `%s`: <its concern>\" where it belongs", name, name)
		case concern == "":
			t.Errorf("docs/design.md's layout lists %s without its concern", name)
		}
	}
	for name := range listed {
		if !want[name] {
			t.Errorf("docs/design.md's layout lists %s, which is not a root .go file or a package directory", name)
		}
	}
}
