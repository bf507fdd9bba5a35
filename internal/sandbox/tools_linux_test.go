//go:build linux

package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// toolsEnv returns the shell's preamble that gives a run's tools the
// environment a sandboxed run has: the home hidden, TMPDIR private, the
// caches sent into it (Caches), this test's own Go toolchain first on the
// PATH, and nothing fetched from the network. The rig's .git is a
// directory of one file, not a repository, so the build stamps no VCS
// information (-buildvcs=false).
func toolsEnv(r rig) string {
	env := []string{
		"HOME=" + r.home, "TMPDIR=" + r.temp,
		"PATH=" + filepath.Join(runtime.GOROOT(), "bin") + ":/usr/local/bin:/usr/bin:/bin",
		"GOFLAGS=-buildvcs=false", "GOPROXY=off", "GOTOOLCHAIN=local", "GOSUMDB=off", "GOPATH=" + filepath.Join(r.temp, "go"),
		"npm_config_update_notifier=false", "npm_config_audit=false", "npm_config_fund=false",
	}
	env = append(env, Caches(r.temp)...)
	return "export " + strings.Join(env, " ") + "; "
}

// project writes a Go module with a test, and an npm package whose one
// dependency is a local directory, into work; prepared also makes the
// entries at the top that the tools write (go.sum, bin, package-lock.json,
// node_modules), as a program does before a run at WorkspaceWrite.
func project(t *testing.T, work string, prepared bool) {
	t.Helper()
	files := map[string]string{
		"go.mod":           "module example.com/m\n\ngo 1.22\n",
		"main.go":          "package main\n\nfunc main() { println(answer()) }\n\nfunc answer() int { return 42 }\n",
		"main_test.go":     "package main\n\nimport \"testing\"\n\nfunc TestAnswer(t *testing.T) {\n\tif answer() != 42 {\n\t\tt.Fatal(answer())\n\t}\n}\n",
		"package.json":     `{"name":"m","version":"1.0.0","dependencies":{"dep":"file:dep"}}`,
		"dep/package.json": `{"name":"dep","version":"1.0.0"}`,
		"dep/index.js":     "module.exports = 42;\n",
	}
	if prepared {
		files["go.sum"] = ""
		files["package-lock.json"] = `{"name":"m","version":"1.0.0","lockfileVersion":3,"requires":true,"packages":{}}`
		for _, d := range []string{"bin", "node_modules"} {
			if err := os.Mkdir(filepath.Join(work, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, body := range files {
		p := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// requireNpm returns whether npm is on the PATH; CI installs it, so
// there its absence fails.
func requireNpm(t *testing.T) bool {
	t.Helper()
	if _, err := exec.LookPath("npm"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI installs Node.js and npm: %v", err)
		}
		t.Logf("no npm on the PATH: the npm probes are not run: %v", err)
		return false
	}
	return true
}

// TestSandboxToolsAtWorkspaceWrite: the real Go toolchain (and npm where
// it is installed) inside the ceiling at WorkspaceWrite, with the caches
// where Caches sends them. In a project whose top already has the entries
// the tools write (go.sum, bin/, package-lock.json, node_modules/), `go
// build -o bin/x`, `go test` and an offline `npm install` of a local
// dependency work. In a fresh one, each new entry at the top is refused
// with EACCES, by design: a held name that does not exist yet (.mcp.json)
// must not be creatable there, and the top admits no new entry at all. So
// `go build` (which writes ./m), a new go.sum and `npm install` (which
// makes package-lock.json and node_modules) fail, and below the top (bin/
// present) the same build works.
func TestSandboxToolsAtWorkspaceWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the Go runtime from a cold cache: minutes on a loaded machine")
	}
	requireLandlock(t)
	npm := requireNpm(t)
	// The two projects' runs share one private temporary directory, so
	// that the second finds the build cache the first filled (a cold
	// cache costs minutes on a loaded machine).
	temp := t.TempDir()
	for _, tc := range []struct {
		name     string
		prepared bool
		probes   []probe
		npm      []probe
	}{
		{"prepared", true, []probe{
			{"go-build-bin", "go build -o bin/x . && test \"$(./bin/x 2>&1)\" = 42", true},
			{"go-test", "go test -count=1 ./...", true},
			{"go-build-top", "go build -o x . 2>&1 | grep -q 'permission denied'", true},
		}, []probe{
			{"npm-install", "npm install --offline && test -e node_modules/dep/index.js && grep -q '\"node_modules/dep\"' package-lock.json", true},
		}},
		{"fresh", false, []probe{
			{"go-build-default", "go build", false},
			{"go-build-default-eacces", "go build 2>&1 | grep -q 'permission denied'", true},
			{"go-sum-new", "touch go.sum", false},
			{"go-sum-new-eacces", "touch go.sum 2>&1 | grep -q 'Permission denied'", true},
			{"bin-new", "mkdir bin", false},
			{"go-build-tmp", "go build -o \"$TMPDIR/x\" . && test \"$(\"$TMPDIR/x\" 2>&1)\" = 42", true},
		}, []probe{
			{"npm-install", "npm install --offline", false},
			{"npm-install-eacces", "npm install --offline 2>&1 | grep -q 'EACCES'", true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			r.temp = temp
			project(t, r.work, tc.prepared)
			probes := tc.probes
			if npm {
				probes = append(probes, tc.npm...)
			}
			env := toolsEnv(r)
			for i := range probes {
				probes[i].command = env + probes[i].command
			}
			run(t, r.policy(WorkspaceWrite), probes)
			for _, name := range []string{"m", "x", "go.sum", "package-lock.json", "node_modules"} {
				if _, err := os.Lstat(filepath.Join(r.work, name)); err == nil && (!tc.prepared || name == "m" || name == "x") {
					t.Errorf("%s was made at the top of the working directory", name)
				}
			}
		})
	}
}
