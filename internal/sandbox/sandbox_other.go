//go:build !linux

package sandbox

import (
	"fmt"
	"os"
	"runtime"
)

// Probe returns an error wrapping ErrUnavailable: only Linux holds a
// filesystem ceiling here.
func Probe() (int, error) {
	return 0, fmt.Errorf("%w: %s has none this library can set (Linux with Landlock has)", ErrUnavailable, runtime.GOOS)
}

// A Ruleset is a built ceiling; there is none on this system.
type Ruleset struct{}

// Restrict fails: there is no ceiling on this system.
func (r *Ruleset) Restrict() error { _, err := Probe(); return err }

// Private reports that there are no private /tmp and /dev/shm here.
func (r *Ruleset) Private() (bool, string) { return false, "no mount namespaces on this system" }

// Namespace returns nil: there are no mount namespaces on this system.
func (r *Ruleset) Namespace() *os.File { return nil }

// Unheld returns nil: nothing is held on this system.
func (r *Ruleset) Unheld() []string { return nil }

// HiddenLinks returns nil: nothing is hidden on this system.
func (r *Ruleset) HiddenLinks() []Link { return nil }

// RestrictDropping fails as Restrict does.
func (r *Ruleset) RestrictDropping(...int) error { return r.Restrict() }

// Close does nothing.
func (r *Ruleset) Close() error { return nil }

// Build fails as Probe does, but at Unlimited without Hidden paths, where
// there is no ceiling to hold.
func Build(p Policy) (*Ruleset, error) {
	if p.Level == Unlimited && len(p.Hidden) == 0 {
		return nil, nil
	}
	_, err := Probe()
	return nil, err
}

// ProbePrivate fails: there are no mount namespaces on this system.
func ProbePrivate() error { _, err := Probe(); return err }

// mainThread reports whether the calling thread is the process's main
// thread; only Linux's threads change what they run under here.
func mainThread() bool { return false }

// EscapeCaps is Linux's: no other system's threads hold capabilities.
var EscapeCaps []int

// DropCaps does nothing: only Linux has capabilities to drop.
func DropCaps(...int) error { return nil }

// A Stage is a first stage in a user namespace; there is none on this
// system.
type Stage struct{}

// Started fails: there are no user namespaces on this system.
func (s *Stage) Started() error { _, err := Probe(); return err }

// Private reports that there are no private /tmp and /dev/shm here.
func (s *Stage) Private() (bool, string) { return false, "no user namespaces on this system" }

// Skipped returns nil: nothing is held on this system.
func (s *Stage) Skipped() []string { return nil }

// Close does nothing.
func (s *Stage) Close() error { return nil }

// Namespace returns nil: there is no namespace to hold on this system.
func (s *Stage) Namespace() *os.File { return nil }

// Walked is a walk for held names below a working directory's top: none
// on this system.
type Walked struct{}

// Walked returns nil: no walk is made on this system.
func (r *Ruleset) Walked() *Walked { return nil }

// Since returns nothing.
func (w *Walked) Since() (made, replaced []string) { return nil, nil }

// PrivatePlan returns nil: there are no private /tmp and /dev/shm here.
func (r *Ruleset) PrivatePlan() []byte { return nil }

// tempOwner names no process: there is no sweep of a dead program's
// temporary directories on this system.
func tempOwner() string { return "" }

// sweepTemps does nothing on this system.
func sweepTemps() {}

// takeTemp finds no directory made ahead on this system.
func takeTemp() string { return "" }

// removeTemp removes dir and everything in it.
func removeTemp(dir string) error { return os.RemoveAll(dir) }

// MakeTempAhead does nothing on this system: NewTemp makes each run's
// directory.
func MakeTempAhead() {}
