//go:build darwin || windows

package proc

import (
	"errors"
	"fmt"
	"os"
)

// reapOnce is the start of Wait where os.Process reaps the root: it fails
// on a second call, else waits for the root to exit and reaps it, then
// calls after (if not nil) whatever the outcome.
func (t *Tree) reapOnce(after func()) (*os.ProcessState, error) {
	if t.sys.waited.Swap(true) {
		return nil, errors.New("proc: Wait called twice")
	}
	<-t.exited
	<-t.sys.done
	ps, err := t.sys.proc.Wait()
	if after != nil {
		after()
	}
	if err != nil {
		return nil, fmt.Errorf("proc: wait: %w", err)
	}
	return ps, nil
}
