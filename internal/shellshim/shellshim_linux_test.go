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
		{"/usr/local/bin/bash", true},
		{"/usr/local/bin/zsh", true},
		{"/bin/busybox", true},
		{"/usr/bin/ksh93", true},
		{"/bin/mksh", true},
		{"/bin/ash", true},
		{"/usr/local/sbin/bash", false},
		{"/usr/sbin/bash", false},
		{"/usr/bin/fish", false},
		{"/bin/csh", false},
		{"/usr/local/bin", false},
		{"/usr/local/bin/", false},
		{"/opt/bin/bash", false},
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
