package driver_test

import (
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clinvoke/clinvoke/invoker"
)

// The host's secrets outside the run's home directory: the other homes
// and the system's credentials, hidden by default, as root (who reads
// them whoever owns them) and as any other user.

// hostSecrets returns the system's secrets that exist here, and a file
// of another home of the host (beneath /home or /root, outside base) that
// this process can read, if any; as root it plants one beneath /home.
func hostSecrets(t *testing.T, base string) []string {
	t.Helper()
	var out []string
	cands := []string{"/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/var/backups/shadow.bak", "/etc/security/opasswd"}
	keys, _ := filepath.Glob("/etc/ssh/ssh_host_*_key")
	for _, p := range append(cands, keys...) {
		if _, err := os.Lstat(p); err == nil {
			out = append(out, p)
		}
	}
	if os.Geteuid() == 0 {
		other, err := os.MkdirTemp("/home", "clinvoke-other-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(other) })
		key := filepath.Join(other, ".ssh", "id_ed25519")
		if err := os.MkdirAll(filepath.Dir(key), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(key, []byte("KEY"), 0o644); err != nil {
			t.Fatal(err)
		}
		out = append(out, key)
	}
	for _, root := range []string{"/home", "/root"} {
		if f := readableFileIn(root, base); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// readableFileIn returns a regular file beneath root, outside skip, that
// this process can read, or "".
func readableFileIn(root, skip string) string {
	found := ""
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil || p == skip || strings.HasPrefix(p, skip+"/"):
			return fs.SkipDir
		case d.Type().IsRegular():
			if f, err := os.Open(p); err == nil {
				f.Close()
				found = p
				return fs.SkipAll
			}
		}
		return nil
	})
	return found
}

// TestSandboxHostSecretsHidden: at every level, a sandboxed run reads
// none of the system's secrets nor another home of the host, though its
// own home is elsewhere; and Show lets the program give one back.
func TestSandboxHostSecretsHidden(t *testing.T) {
	requireSandbox(t)
	r := newSandboxRig(t)
	secrets := hostSecrets(t, filepath.Dir(r.home))
	if len(secrets) == 0 {
		t.Fatal("no secret of the host to read here")
	}
	if os.Geteuid() == 0 {
		// The rows read as root are readable without the sandbox.
		for _, s := range secrets {
			if _, err := os.ReadFile(s); err != nil {
				t.Fatalf("%s unreadable without the sandbox: %v", s, err)
			}
		}
	}
	var reads []string
	for _, s := range secrets {
		reads = append(reads, "content "+s)
	}
	for _, perm := range []invoker.Permission{invoker.ReadOnly, invoker.WorkspaceWrite, invoker.Unlimited} {
		t.Run(string(perm), func(t *testing.T) {
			got, _ := r.invoke(t, perm, invoker.Sandbox{Mode: "required"}, append(reads, "read "+r.work+"/a.txt")...)
			sandboxWant(t, got, []string{"read " + r.work + "/a.txt"}, nil)
			for _, k := range reads {
				// Hidden by the rules, or masked where the run has a
				// mount namespace: refused, or for root an empty file.
				if !strings.Contains(got[k], "permission denied") && !(os.Geteuid() == 0 && strings.HasSuffix(got[k], "empty")) {
					t.Errorf("%s: %q, want permission denied (or, as root, empty)", k, got[k])
				}
			}
		})
	}
	if os.Geteuid() == 0 {
		t.Run("shown", func(t *testing.T) {
			// A file of the host may be empty (opasswd): read, not content.
			var shown []string
			for _, s := range secrets {
				shown = append(shown, "read "+s)
			}
			got, _ := r.invoke(t, invoker.ReadOnly, invoker.Sandbox{Mode: "required", Show: secrets}, shown...)
			sandboxWant(t, got, shown, nil)
		})
	}
}

// homeBase returns a new directory beneath /home, removed after the test:
// as root one of its own, as a user one in the user's home where that
// lies beneath /home.
func homeBase(t *testing.T) string {
	t.Helper()
	parent := "/home"
	if os.Geteuid() != 0 {
		u, err := user.Current()
		if err != nil || !strings.HasPrefix(u.HomeDir, "/home/") {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI's user has no home beneath /home (%v)", err)
			}
			t.Skipf("this user's home %q is not beneath /home", u.HomeDir)
		}
		parent = u.HomeDir
	}
	dir, err := os.MkdirTemp(parent, "clinvoke-sandbox-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestSandboxWorkdirBeneathHomes: with /home hidden, a run whose home and
// working directory lie beneath it reads and writes its working directory
// at WorkspaceWrite and reads its CLI's own directory, and still reads
// neither its home's other files nor the rest of /home.
func TestSandboxWorkdirBeneathHomes(t *testing.T) {
	requireSandbox(t)
	base := homeBase(t)
	r := newSandboxRigIn(t, base)
	sibling := filepath.Join(base, "sibling")
	if err := os.WriteFile(sibling, []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, _ := r.invoke(t, invoker.WorkspaceWrite, invoker.Sandbox{Mode: "required"},
		"read "+r.work+"/a.txt", "write "+r.work+"/src/new.txt", "write "+r.work+"/a.txt",
		"read "+r.home+"/.claude/settings.json", "read "+r.home+"/.ssh/id_ed25519", "read "+sibling)
	sandboxWant(t, got,
		[]string{"read " + r.work + "/a.txt", "write " + r.work + "/src/new.txt", "write " + r.work + "/a.txt", "read " + r.home + "/.claude/settings.json"},
		[]string{"read " + r.home + "/.ssh/id_ed25519", "read " + sibling})
}
