package web

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

// The page loads nothing from elsewhere: every embedded file refers only to this server.
func TestEveryEmbeddedFileRefersOnlyToThisServer(t *testing.T) {
	t.Parallel()
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	n := 0
	fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error { //nolint:errcheck
		if err != nil || d.IsDir() {
			return err
		}
		n++
		b, _ := files.ReadFile(p)
		if m := external.Find(b); m != nil {
			t.Errorf("%s refers to %s", p, m)
		}
		return nil
	})
	if n < 10 { // 6 templates, 2 dictionaries, a script and a style sheet
		t.Fatalf("only %d embedded files", n)
	}
}

// Every word the page shows is in both languages: the dictionaries name the same keys, every
// key the templates and the script ask for is there, and the Chinese one holds no English
// left untranslated (only the switch to English, and the units MB and KB, which Chinese
// writes the same, are written in Latin letters).
func TestEveryWordIsInBothLanguages(t *testing.T) {
	t.Parallel()
	dict, err := words()
	if err != nil {
		t.Fatal(err)
	}
	for k := range dict["zh"] {
		if _, ok := dict["en"][k]; !ok {
			t.Errorf("zh has %q, en does not", k)
		}
	}
	han := regexp.MustCompile(`\p{Han}`)
	latin := regexp.MustCompile(`[A-Za-z]`)
	for k, v := range dict["zh"] {
		if k != "nav.lang" && !strings.HasPrefix(k, "size_unit.") && !han.MatchString(v) && latin.MatchString(regexp.MustCompile(`\{[^}]*\}`).ReplaceAllString(v, "")) {
			t.Errorf("zh.json %q is not Chinese: %q", k, v)
		}
	}
	used := map[string]bool{}
	for _, pattern := range []string{"templates/*.html", "assets/app.js"} {
		names, _ := fs.Glob(files, pattern)
		for _, name := range names {
			b, _ := files.ReadFile(name)
			// A key written whole; t('status.' + s) builds one of a family the dictionaries
			// hold whole.
			for _, m := range regexp.MustCompile(`\{\{t "([^"]+)"\}\}|\bt\('([^']+[^.'])'`).FindAllSubmatch(b, -1) {
				used[string(m[1])+string(m[2])] = true
			}
		}
	}
	if len(used) < 50 {
		t.Fatalf("found only %d words in use", len(used))
	}
	for k := range used {
		for _, lang := range []string{"en", "zh"} {
			if _, ok := dict[lang][k]; !ok {
				t.Errorf("%q is used but not in %s.json", k, lang)
			}
		}
	}
}
