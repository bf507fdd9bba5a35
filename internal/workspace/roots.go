package workspace

import "os"

// The judge of a server's roots: mcpadapter's Options.Roots, under which a
// call's workdir and images must lie. They are judged as Root judges the
// paths an agent asks to change, by the same resolution and comparison:
// one path judge.

// Existing returns the real form of the absolute path p, resolved as Root
// resolves the paths it judges (every symbolic link followed, ".." taken
// as the kernel takes it, from a link's target), when the whole of it
// exists; otherwise an error, which matches fs.ErrNotExist when a part of
// p is missing.
func Existing(p string) (string, error) {
	real, err := resolve(p)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(real); err != nil {
		return "", err
	}
	return real, nil
}

// Within reports whether the real path p is dir or lies below it. It
// compares names, so /srv/ab is not within /srv/a. Both are real paths,
// as Existing returns them.
func Within(dir, p string) bool {
	_, ok := under(dir, p)
	return ok
}
