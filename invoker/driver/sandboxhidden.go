package driver

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// What a sandboxed run cannot read unless the program shows it
// (Sandbox.Show): every home directory of the host, and the system's
// secrets this process could read. The CLI's own directories, its
// install, the working directory and its temporary directory stay
// readable beneath them (Policy.Visible, and sight's visible paths).

// homesRoot are the directories that hold the host's home directories,
// hidden whole.
var homesRoot = []string{"/home", "/root"}

// systemSecrets are the host's files and directories that hold
// credentials: password hashes (and their backups), the SSH host keys'
// private halves (hostKeys), TLS and Kerberos keys, stored network
// passwords, systemd's credentials, a Kubernetes node's keys. Root reads
// them whoever owns them (CAP_DAC_OVERRIDE is kept, see
// sandbox.EscapeCaps); another user reads them only where their modes
// let it, and a path this process cannot read is not hidden (see
// defaultHidden). /etc/sudoers and the public halves of keys are not
// secret and stay readable.
var systemSecrets = []string{
	"/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-",
	"/etc/security/opasswd",
	"/var/backups/shadow.bak", "/var/backups/gshadow.bak",
	"/etc/ssl/private",
	"/etc/krb5.keytab",
	"/etc/NetworkManager/system-connections", "/etc/wireguard",
	"/etc/credstore", "/etc/credstore.encrypted", "/var/lib/systemd/credential.secret",
	"/etc/kubernetes/pki", "/etc/kubernetes/admin.conf", "/etc/kubernetes/super-admin.conf",
	"/var/lib/kubelet/pki",
	"/var/lib/sss/db", "/var/lib/sss/secrets",
}

// hostKeysDir holds the SSH host keys: each private key is named
// ssh_host_*_key, its public half ssh_host_*_key.pub.
const hostKeysDir = "/etc/ssh"

// minLoginUID is the lowest user id of a person's account (Debian's,
// Fedora's and Arch's UID_MIN): a home in /etc/passwd beneath neither
// of homesRoot is hidden only for such an account, since a system
// account's "home" is often a tree every run needs (bin's /bin,
// daemon's /usr/sbin, sys's /dev).
const minLoginUID = 1000

// nobodyUID is the overflow user, whose home is /nonexistent or similar.
const nobodyUID = 65534

// defaultHidden returns the directories a sandboxed run cannot read by
// default: home (the run's home directory, see homeHidden), homesRoot,
// and the homes of the people's accounts in /etc/passwd that lie beneath
// neither. A path that does not exist is left out.
func defaultHidden(home string) []string {
	hidden := homeHidden(home)
	for _, d := range homesRoot {
		if lexists(d) {
			hidden = append(hidden, d)
		}
	}
	return append(hidden, passwdHomes("/etc/passwd")...)
}

// defaultMasked returns the system's secrets a sandboxed run cannot read
// by default (systemSecrets, the SSH host keys' private halves), masked
// where the run has its mount namespace (sandbox.Policy.Masked): hidden by
// the rules, each would split its directory (/etc's hundred-odd entries
// ruled one by one, about 1.5 ms a run). One that does not exist is left
// out, and so is one this process cannot read (another user's run cannot
// either).
func defaultMasked() []string {
	var masked []string
	for _, p := range append(hostKeys(hostKeysDir), systemSecrets...) {
		if readable(p) {
			masked = append(masked, p)
		}
	}
	return masked
}

// hostKeys returns the SSH host's private keys in dir (ssh_host_*_key),
// not their public halves.
func hostKeys(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var keys []string
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, "ssh_host_") && strings.HasSuffix(n, "_key") {
			keys = append(keys, filepath.Join(dir, n))
		}
	}
	return keys
}

// passwdHomes returns the home directories in the passwd file at path of
// the accounts of people (minLoginUID and above, nobody excepted) that
// lie beneath none of homesRoot and exist, "/" excepted.
func passwdHomes(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// name:password:uid:gid:gecos:home:shell
		f := strings.Split(sc.Text(), ":")
		if len(f) < 7 {
			continue
		}
		uid, err := strconv.ParseUint(f[2], 10, 32)
		if err != nil || uid < minLoginUID || uid == nobodyUID {
			continue
		}
		h := filepath.Clean(f[5])
		if !filepath.IsAbs(h) || h == "/" || beneathAny(h, homesRoot) || !lexists(h) {
			continue
		}
		out = append(out, h)
	}
	return out
}

// beneathAny reports whether p is one of roots or beneath one.
func beneathAny(p string, roots []string) bool {
	for _, r := range roots {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

// lexists reports whether p exists (a link is not followed).
func lexists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
