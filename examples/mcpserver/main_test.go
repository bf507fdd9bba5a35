package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/codex"
	"github.com/clinvoke/clinvoke/invoker"
)

func TestCheckRoots(t *testing.T) {
	home := t.TempDir()
	project := filepath.Join(home, "src")
	if err := os.Mkdir(project, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "home")
	if err := os.Symlink(home, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		roots    []string
		explicit bool
		err      string // a substring of the error, if any
		warn     string // a substring of the one warning, if any
	}{
		{"cwd is /", []string{"/"}, false, "pass -root / to allow every directory", ""},
		{"-root /", []string{"/"}, true, "", "root / allows a workdir anywhere"},
		{"cwd is home", []string{home}, false, "", "it is the current directory, the default root"},
		{"-root home", []string{project, home + "/"}, true, "", "is the home directory"},
		{"-root a link to home", []string{link}, true, "", "is the home directory"},
		{"-root project", []string{project}, true, "", ""},
		{"cwd is a project", []string{project}, false, "", ""},
	} {
		warnings, err := checkRoots(tc.roots, tc.explicit, home)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: checkRoots() error = %v, want one saying %q", tc.name, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%s: checkRoots() error = %v", tc.name, err)
		}
		switch {
		case tc.warn == "" && len(warnings) > 0:
			t.Errorf("%s: warnings %q, want none", tc.name, warnings)
		case tc.warn != "" && (len(warnings) != 1 || !strings.Contains(warnings[0], tc.warn) || !strings.Contains(warnings[0], "-root DIR")):
			t.Errorf("%s: warnings %q, want one saying %q and how to restrict it", tc.name, warnings, tc.warn)
		}
	}
}

func TestCheckPermissions(t *testing.T) {
	for _, tc := range []struct {
		perm, max string
		err       string // a substring of the error, "" for none
	}{
		{"read-only", "workspace-write", ""},
		{"unlimited", "unlimited", ""},
		{"admin", "unlimited", `-permission "admin"`},
		{"read-only", "root", `-max-permission "root"`},
		{"unlimited", "read-only", "-permission unlimited is above -max-permission read-only"},
	} {
		err := checkPermissions(tc.perm, tc.max)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("checkPermissions(%q, %q) error = %v", tc.perm, tc.max, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("checkPermissions(%q, %q) error = %v, want one saying %q", tc.perm, tc.max, err, tc.err)
		}
	}
}

// A missing CLI is explained in the server's flags, not the library's Go
// options; the error still matches invoker.ErrNotInstalled, and the
// wrapper keeps the CLI's capabilities.
func TestMissingCLISpeaksInFlags(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "no-such-codex")
	for _, tc := range []struct {
		bin  string
		want string
	}{
		{"", "-codex-bin PATH"},
		{missing, "fix the server's -codex-bin flag"},
	} {
		opts := []invoker.Options{}
		if tc.bin != "" {
			opts = append(opts, invoker.Options{Binary: tc.bin})
		} else {
			t.Setenv("PATH", dir) // no codex there
		}
		inv := flagWorded{Invoker: codex.New(opts...), bin: tc.bin}
		_, err := inv.Invoke(context.Background(), invoker.Request{Prompt: "hi", Workdir: dir})
		if !errors.Is(err, invoker.ErrNotInstalled) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "invoker.Options.Binary") {
			t.Errorf("bin %q: Invoke() error = %v, want ErrNotInstalled saying %q and not naming Go options", tc.bin, err, tc.want)
		}
		if c := inv.Capabilities(); !c.Images {
			t.Errorf("flagWorded.Capabilities() = %v, want codex's", c)
		}
	}
}

// TestNetworkFlag: -network's comma-separated rules, nil when empty.
func TestNetworkFlag(t *testing.T) {
	if got := networkRules(""); got != nil {
		t.Errorf("networkRules(\"\") = %q, want nil", got)
	}
	rules := networkRules(" none ")
	if !slices.Equal(rules, []string{"none"}) {
		t.Errorf("networkRules(\" none \") = %q, want [none]", rules)
	}
	if got := networkRules("a.example, *.b.example:443,"); !slices.Equal(got, []string{"a.example", "*.b.example:443"}) {
		t.Errorf("networkRules(list) = %q", got)
	}
}
