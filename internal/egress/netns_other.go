//go:build !linux

package egress

import "errors"

// enterNamespace reports that only Linux has network namespaces.
func enterNamespace() error {
	return &NamespaceError{Op: "network namespace", Err: errors.ErrUnsupported, Missing: "network namespaces exist only on Linux; this system gives no network sandbox"}
}

func ipv6Loopback() bool { return false }

// Probe reports whether this process can give a run a network namespace:
// nil if so, else a *NamespaceError (matching ErrUnavailable) naming what
// is missing. Only Linux can.
func Probe() error { return enterNamespace() }
