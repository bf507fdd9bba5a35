package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// repo reads the report and the Markdown files that quote it, from the
// root of the repository.
func repo(t *testing.T) (*report, string, map[string]string) {
	t.Helper()
	root := filepath.Join("..", "..")
	b, err := os.ReadFile(filepath.Join(root, "BENCHMARKS.md"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := parseReport(string(b))
	if err != nil {
		t.Fatalf("BENCHMARKS.md: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append(files, filepath.Join(root, "README.md"), filepath.Join(root, "e2e", "README.md"))
	docs := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		docs[rel] = string(b)
	}
	return rep, string(b), docs
}

// Every figure the repository quotes from its benchmarks is the one the
// raw output stored in BENCHMARKS.md renders: BENCHMARKS.md's own table,
// and each figures region of README.md, e2e/README.md and docs/*.md.
func TestStoredFiguresAgree(t *testing.T) {
	rep, _, docs := repo(t)
	if err := checkReport(rep); err != nil {
		t.Errorf("%v\n(scripts/bench writes BENCHMARKS.md: edit the run's raw output, never the table)", err)
	}
	if err := checkDocs(rep, docs); err != nil {
		t.Errorf("%v\n(go run ./scripts/benchreport -docs renders them from BENCHMARKS.md)", err)
	}
	regions := 0
	for _, text := range docs {
		regions += len(regionTexts(text))
	}
	if regions == 0 {
		t.Error("no figures region in README.md or docs/*.md: the check checks nothing")
	}
}

// The check fails when a figure is edited by hand: in BENCHMARKS.md's
// table, or in a region of the docs.
func TestCheckCatchesHandEdits(t *testing.T) {
	rep, _, docs := repo(t)

	// A value of BENCHMARKS.md's table, one digit changed.
	edited := *rep
	edited.table = append([]string(nil), rep.table...)
	for i, l := range edited.table {
		if i > 1 && strings.Contains(l, "| yes |") {
			edited.table[i] = bumpDigit(t, l, strings.Index(l, " | ")+3)
			break
		}
	}
	if err := checkReport(&edited); err == nil {
		t.Error("checkReport() = nil for a table edited by hand, want an error")
	}

	// A figure in each region of the docs, one digit changed.
	for name, text := range docs {
		for i, region := range regionTexts(text) {
			start := strings.Index(region, "-->") + len("-->")
			if strings.IndexAny(region[start:], "0123456789") < 0 {
				continue
			}
			hand := strings.Replace(text, region, bumpDigit(t, region, start), 1)
			err := checkDocs(rep, map[string]string{name: hand})
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s region %d edited by hand: checkDocs() = %v, want an error naming the file", name, i+1, err)
			}
		}
	}

	// A region that names no renderer, or has no end.
	for _, text := range []string{
		"a <!-- figures: no-such-figure -->1 ms<!-- /figures --> b",
		"a <!-- figures: startup -->1 ms",
	} {
		if err := checkDocs(rep, map[string]string{"x.md": text}); err == nil {
			t.Errorf("checkDocs(%q) = nil, want an error", text)
		}
	}
}

// bumpDigit changes the digit at or after byte i of s.
func bumpDigit(t *testing.T, s string, i int) string {
	t.Helper()
	for ; i < len(s); i++ {
		if c := s[i]; c >= '0' && c <= '9' {
			return s[:i] + string('0'+(c-'0'+1)%10) + s[i+1:]
		}
	}
	t.Fatalf("no digit in %q", s)
	return s
}

// The summary states a missed target as plainly as the ones met, with the
// spread of its rounds.
func TestSummaryStatesMisses(t *testing.T) {
	rep, _, _ := repo(t)
	var missed []row
	for _, r := range rep.rows {
		if r.ok != nil && !r.ok(r.value) {
			missed = append(missed, r)
		}
	}
	text, err := renderers["summary"](rep)
	if err != nil {
		t.Fatal(err)
	}
	if len(missed) == 0 && !strings.Contains(text, "Missed: none.") {
		t.Errorf("summary %q, want it to say that nothing was missed", text)
	}
	for _, r := range missed {
		fig, _, _ := strings.Cut(r.figure, " (`")
		if !strings.Contains(text, fig+": "+r.shown()+" against "+r.target) {
			t.Errorf("summary %q does not state the missed target %q", text, fig)
		}
	}
}
