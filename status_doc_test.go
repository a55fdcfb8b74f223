package llmrelay

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestStatusJSONDocumented: every field of the status JSON is in the
// table in docs/observability.md, so the schema stays documented as it
// grows.
func TestStatusJSONDocumented(t *testing.T) {
	page, err := os.ReadFile("docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(page)
	start := strings.Index(doc, "**The JSON**, field by field")
	if start < 0 {
		t.Fatal("docs/observability.md has no status JSON table")
	}
	doc = doc[start:]
	table := strings.Index(doc, "| field |")
	doc = doc[:table+strings.Index(doc[table:], "\n\n")]
	documented := func(name string) bool {
		for _, form := range []string{"`" + name + "`", "`." + name + "`", "." + name + "`", "`." + name + "[]`", "`" + name + "[]`"} {
			if strings.Contains(doc, form) {
				return true
			}
		}
		return false
	}
	seen := map[reflect.Type]bool{}
	var walk func(tp reflect.Type, path string)
	walk = func(tp reflect.Type, path string) {
		for tp.Kind() == reflect.Pointer || tp.Kind() == reflect.Slice || tp.Kind() == reflect.Array {
			tp = tp.Elem()
		}
		if tp.Kind() != reflect.Struct || tp.PkgPath() == "time" || seen[tp] {
			return
		}
		seen[tp] = true
		for i := range tp.NumField() {
			f := tp.Field(i)
			if f.Anonymous {
				walk(f.Type, path)
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" || !f.IsExported() {
				continue
			}
			if !documented(name) {
				t.Errorf("status field %s%s is not in docs/observability.md's table", path, name)
			}
			walk(f.Type, path+name+".")
		}
	}
	walk(reflect.TypeOf(Status{}), "")
}
