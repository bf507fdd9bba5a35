package driver

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/clinvoke/clinvoke/internal/sandbox"
)

// TestSandboxHostKeysPrivateOnly: of the SSH host keys, the private ones
// are hidden and their public halves are not.
func TestSandboxHostKeysPrivateOnly(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"ssh_host_ed25519_key", "ssh_host_ed25519_key.pub", "ssh_host_rsa_key", "ssh_host_rsa_key.pub", "sshd_config", "moduli"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got := hostKeys(dir)
	want := []string{filepath.Join(dir, "ssh_host_ed25519_key"), filepath.Join(dir, "ssh_host_rsa_key")}
	if !slices.Equal(got, want) {
		t.Errorf("hostKeys = %q, want %q", got, want)
	}
	if got := hostKeys(filepath.Join(dir, "missing")); got != nil {
		t.Errorf("hostKeys of a missing directory = %q, want none", got)
	}
}

// TestSandboxPasswdHomes: the homes of people's accounts beneath neither
// /home nor /root are hidden; a system account's home (often a tree every
// run needs), nobody's, "/", a relative or a missing one are not.
func TestSandboxPasswdHomes(t *testing.T) {
	base := t.TempDir()
	alice, bob := filepath.Join(base, "alice"), filepath.Join(base, "srv", "bob")
	for _, d := range []string{alice, bob} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	passwd := filepath.Join(base, "passwd")
	lines := "root:x:0:0:root:/root:/bin/bash\n" +
		"bin:x:2:2:bin:/bin:/usr/sbin/nologin\n" +
		"www-data:x:33:33:www-data:" + alice + ":/usr/sbin/nologin\n" + // a system account: kept
		"nobody:x:65534:65534:nobody:" + bob + ":/usr/sbin/nologin\n" +
		"alice:x:1000:1000::" + alice + "/:/bin/bash\n" +
		"bob:x:1001:1001::" + bob + ":/bin/bash\n" +
		"carol:x:1002:1002::/home/carol:/bin/bash\n" + // beneath /home: hidden whole
		"dave:x:1003:1003::/:/bin/sh\n" +
		"erin:x:1004:1004::rel/erin:/bin/sh\n" +
		"frank:x:1005:1005::" + base + "/gone:/bin/sh\n" +
		"broken line\n"
	if err := os.WriteFile(passwd, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := passwdHomes(passwd), []string{alice, bob}; !slices.Equal(got, want) {
		t.Errorf("passwdHomes = %q, want %q", got, want)
	}
	if got := passwdHomes(filepath.Join(base, "none")); got != nil {
		t.Errorf("passwdHomes of a missing file = %q, want none", got)
	}
}

// BenchmarkSandboxHiddenBuild is the cost of the hidden set in a run's
// ruleset: the run's home alone (the baseline, "home") against the
// default set ("host": the other homes hidden, and the secrets this
// process can read masked where the run gets its mount namespace, else
// hidden, each hidden file splitting its directory; "host-rules": the
// secrets hidden by the rules, as where no mount namespace is given),
// each the set's making and a ReadOnly ruleset's build with its private
// roots' plan, its record reused from the third build on as in a
// program's runs.
func BenchmarkSandboxHiddenBuild(b *testing.B) {
	if _, err := sandbox.Probe(); err != nil {
		b.Skip(err)
	}
	// Outside /tmp, whose entries (many on a busy host) the walk would
	// list and allow each.
	base, err := os.MkdirTemp("/var/tmp", "clinvoke-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(base) })
	work, home, temp := filepath.Join(base, "work"), filepath.Join(base, "home"), filepath.Join(base, "temp")
	for _, d := range []string{work, home, temp} {
		if err := os.Mkdir(d, 0o700); err != nil {
			b.Fatal(err)
		}
	}
	none := func() []string { return nil }
	for _, c := range []struct {
		name    string
		hidden  func(string) []string
		masked  func() []string
		private bool
	}{{"home", homeHidden, none, true}, {"host", defaultHidden, defaultMasked, true}, {"host-rules", defaultHidden, defaultMasked, false}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				r, err := sandbox.Build(sandbox.Policy{Level: sandbox.ReadOnly, Workdir: work, Temp: temp, Private: c.private,
					Hidden: c.hidden(home), Masked: c.masked(), Visible: installOf(os.Args[0], os.Environ())})
				if err != nil {
					b.Fatal(err)
				}
				r.Close()
			}
		})
	}
}
