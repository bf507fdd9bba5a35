package mountinfo

import "testing"

func TestUnescape(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"/sys/fs/cgroup", "/sys/fs/cgroup"},
		{`/mnt/a\040b`, "/mnt/a b"},
		{`/mnt/tab\011nl\012`, "/mnt/tab\tnl\n"},
		{`/mnt/back\134slash`, `/mnt/back\slash`},
		{`/mnt/not\08x`, `/mnt/not\08x`},
		{`/mnt/short\04`, `/mnt/short\04`},
	} {
		if got := Unescape(c.in); got != c.want {
			t.Errorf("Unescape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
