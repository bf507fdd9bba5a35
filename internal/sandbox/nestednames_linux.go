//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The held names of a working directory (a nested repository's .git, a
// .claude or .mcp.json one directory down, a .env below) are held by the
// ruleset only at its top: Landlock's rules attach to inodes, and a
// subdirectory the run may write allows everything beneath it. Those that
// exist when the run starts can be held by the private roots' mount
// namespace instead, each bound read-only over itself; walkNested finds
// them for the plan.

// A walkBudget bounds walkNested: the directory entries it reads and
// how deep below the top it goes.
type walkBudget struct {
	entries int // entries read, in every directory listed
	depth   int // directories below the top it lists (the top's entries are 1)
}

// nestedBudget is the walk a run's plan makes: a working directory of
// tens of thousands of entries is walked whole in some milliseconds
// (docs/sandbox.md, BenchmarkNestedWalk), and one larger is cut, the cut
// reported.
var nestedBudget = walkBudget{entries: 50000, depth: 32}

// unwalked are the directory names the walk does not enter: the
// packages a tool installed, which no user's git or CLI runs in.
var unwalked = []string{"node_modules"}

// A nestedWalk is what walkNested found below the top of a working
// directory.
type nestedWalk struct {
	// Names are the held names found that are no symbolic link, files or
	// directories, sorted: each is bound read-only over itself, whole.
	Names []string
	// Links are the held names found that are symbolic links, followed
	// (linkChain): each is held as a held name of the top that is one.
	Links []chain
	// Cut says where the walk stopped short, or is empty.
	Cut string
}

// walkNested walks the working directory dir, breadth first, for the
// entries named one of held below its top (the top's own are held by the
// ruleset), within budget. It enters neither a held name (held whole),
// nor a symbolic link, nor a directory of unwalked, nor one it cannot
// list; an entry beyond the budget is not read, and Cut says where the
// walk stopped. It reads the filesystem only: the same tree gives the
// same walk.
func walkNested(dir string, held []string, budget walkBudget) nestedWalk {
	var w nestedWalk
	if dir == "" || len(held) == 0 {
		return w
	}
	dir = filepath.Clean(dir)
	type level struct {
		dir   string
		depth int
	}
	queue := []level{{dir, 0}}
	read := 0
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		if d.depth > budget.depth {
			w.Cut = fmt.Sprintf("the walk for held names below the top of %s stopped at %s, %d directories deep (names below it, and in %d more directories as deep, are not held)", dir, d.dir, budget.depth, len(queue))
			break
		}
		entries, err := os.ReadDir(d.dir)
		if err != nil {
			continue // the run's user cannot list it either, or it is gone
		}
		if read+len(entries) > budget.entries {
			w.Cut = fmt.Sprintf("the walk for held names below the top of %s stopped after %d entries, at %s (names in it and in %d more directories are not held)", dir, read, d.dir, len(queue))
			break
		}
		read += len(entries)
		for _, e := range entries {
			name := e.Name()
			path := filepath.Join(d.dir, name)
			if isHeld(name, held) {
				if d.depth == 0 {
					continue // the ruleset's
				}
				if c := linkChain(path); c.link {
					c.held = true
					w.Links = append(w.Links, c)
				} else {
					w.Names = append(w.Names, path)
				}
				continue
			}
			if e.IsDir() && !slices.Contains(unwalked, name) {
				queue = append(queue, level{path, d.depth + 1})
			}
		}
	}
	slices.Sort(w.Names)
	slices.SortFunc(w.Links, func(a, b chain) int { return strings.Compare(a.paths[0], b.paths[0]) })
	return w
}
