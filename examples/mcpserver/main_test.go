package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
