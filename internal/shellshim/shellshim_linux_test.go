//go:build linux

package shellshim

import "testing"

// TestIsShell: a shell's name in a shell's directory, clean, and nothing
// else.
func TestIsShell(t *testing.T) {
	for _, c := range []struct {
		path string
		want bool
	}{
		{"/bin/sh", true},
		{"/usr/bin/bash", true},
		{"/usr/bin/dash", true},
		{"/bin/zsh", true},
		{"/usr/local/bin/bash", false},
		{"/bin/ls", false},
		{"/bin", false},
		{"sh", false},
		{"", false},
		{"/sh", false},
		{"/tmp/.clinvoke-shells/usr/bin/bash", false},
		{"/usr/bin/bash/", false},
	} {
		if got := IsShell(c.path); got != c.want {
			t.Errorf("IsShell(%q) = %v, want %v", c.path, got, c.want)
		}
	}
}
