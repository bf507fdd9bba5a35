package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/invoker"
)

// warnLog records what endWarnings logs.
type warnLog []string

func (l *warnLog) Warn(msg string, args ...any) { *l = append(*l, fmt.Sprint(msg, args)) }

// TestSettingsChangedWarned: where the settings are not held (no mount
// namespace for the run), a settings file that existed and changes (its
// size, or a link that now leads elsewhere) is warned of once, naming it;
// an unchanged one is not; what no event could tell any more (the run's
// end) goes to the run's log.
func TestSettingsChangedWarned(t *testing.T) {
	dir := t.TempDir()
	written, relinked, kept, made := filepath.Join(dir, "CLAUDE.md"), filepath.Join(dir, "settings.json"), filepath.Join(dir, "AGENTS.md"), filepath.Join(dir, "GEMINI.md")
	for _, f := range []string{written, kept, filepath.Join(dir, "a"), filepath.Join(dir, "b")} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("a", relinked); err != nil {
		t.Fatal(err)
	}
	rs := &runSandbox{cli: "claude", unheld: []string{made}}
	for _, f := range []string{written, relinked, kept} {
		rs.seen = append(rs.seen, seeSettings(f))
	}
	if evs := rs.settingsWarnings(nil); len(evs) != 0 {
		t.Fatalf("warnings %v before any change, want none", evs)
	}
	if err := os.WriteFile(written, []byte("xy"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(relinked); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("b", relinked); err != nil {
		t.Fatal(err)
	}
	evs := rs.settingsWarnings(nil)
	if len(evs) != 2 || !strings.Contains(evs[0].Text, "the run changed "+written) || !strings.Contains(evs[1].Text, "the run changed "+relinked) ||
		!strings.Contains(evs[0].Text, "could not hold it read-only") {
		t.Errorf("warnings %v, want one for %s and one for %s", evs, written, relinked)
	}
	if evs := rs.settingsWarnings(nil); len(evs) != 0 {
		t.Errorf("warnings %v a second time, want each once", evs)
	}
	// Made after the last event: the run's end leaves it to a turn that
	// ends after the run (a one-shot run's), and logs it where none does.
	if err := os.WriteFile(made, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var log warnLog
	rs.endWarnings(&log, true)
	if len(log) != 0 {
		t.Errorf("logged %q with a turn after the run, want it left to the turn", log)
	}
	rs.endWarnings(&log, false)
	if len(log) != 1 || !strings.Contains(log[0], "the run made "+made) {
		t.Errorf("logged %q, want the made %s", log, made)
	}
}

// TestSettingsChangedAgainWarned: a settings file the run made or changed
// is warned of again at each later change, not only at the first: the
// look keeps the file as it was last warned of.
func TestSettingsChangedAgainWarned(t *testing.T) {
	dir := t.TempDir()
	written, made := filepath.Join(dir, "CLAUDE.md"), filepath.Join(dir, "GEMINI.md")
	if err := os.WriteFile(written, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	rs := &runSandbox{cli: "claude", unheld: []string{made}, seen: []settingsSeen{seeSettings(written)}}
	for i, content := range []string{"xy", "xyz", "xyzw"} {
		for _, f := range []string{written, made} {
			if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		evs := rs.settingsWarnings(nil)
		wantMade := "the run changed " + made
		if i == 0 {
			wantMade = "the run made " + made
		}
		var texts []string
		for _, ev := range evs {
			texts = append(texts, ev.Text)
		}
		joined := strings.Join(texts, "\n")
		if len(evs) != 2 || !strings.Contains(joined, "the run changed "+written) || !strings.Contains(joined, wantMade) {
			t.Errorf("change %d: warnings %q, want one for %s and one %q", i+1, texts, written, wantMade)
		}
		if evs := rs.settingsWarnings(nil); len(evs) != 0 {
			t.Errorf("change %d: warnings %v with nothing changed since, want none", i+1, evs)
		}
	}
}

// TestSettingsLinkWarningLogged: a warning of a settings link into a
// hidden path that no turn delivered yet (the CLI exited before the
// first) goes to the run's log at its end, and stays for the turn whose
// end delivers it after the reap (a one-shot run whose CLI gave no
// event); one a turn delivered is not logged.
func TestSettingsLinkWarningLogged(t *testing.T) {
	text := "~/.claude/settings.json links into the hidden ~/.gemini"
	rs := &runSandbox{cli: "claude"}
	rs.links.add(invoker.Event{Kind: invoker.KindWarning, Text: text})
	var log warnLog
	rs.endWarnings(&log, false)
	if len(log) != 1 || !strings.Contains(log[0], text) {
		t.Errorf("logged %q, want the undelivered %q", log, text)
	}
	log = nil
	if evs := rs.linkWarnings(); len(evs) != 1 || evs[0].Text != text {
		t.Errorf("the turn's end got %v after the run's end logged it, want the warning still", evs)
	}
	delivered := &runSandbox{cli: "claude"}
	delivered.links.add(invoker.Event{Kind: invoker.KindWarning, Text: text})
	delivered.linkWarnings()
	delivered.endWarnings(&log, false)
	if len(log) != 0 {
		t.Errorf("logged %q after a turn delivered the warning, want nothing", log)
	}
}

// TestSettingsHeldChangeWording: where the run had its settings held
// read-only (its mount namespace), a change is not the run's: the
// warning says the file changed while the run was running.
func TestSettingsHeldChangeWording(t *testing.T) {
	f := filepath.Join(t.TempDir(), "CLAUDE.md")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	rs := &runSandbox{cli: "claude", priv: true, seen: []settingsSeen{seeSettings(f)}}
	if err := os.WriteFile(f, []byte("xy"), 0o644); err != nil {
		t.Fatal(err)
	}
	evs := rs.settingsWarnings(nil)
	if len(evs) != 1 || !strings.Contains(evs[0].Text, f+" changed while the run was running") || strings.Contains(evs[0].Text, "the run changed") {
		t.Errorf("warnings %v, want one saying %s changed while the run was running, not that the run changed it", evs, f)
	}
}
