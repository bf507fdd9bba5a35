//go:build !linux

package egress

// rawSocket is Linux's alone: the helper that asks runs only there.
func rawSocket() string { return "" }
