// Package shellshim is the part of the sandbox's shell shim that runs
// when this program's binary is started through a shell's path: in a
// run's mount namespace the sandbox binds the binary over each shell
// (internal/sandbox, shim_linux.go), and this package's init recognises
// such a start by /proc/self/exe, puts the command in a Landlock domain
// nested in the CLI's and executes the real shell.
//
// It imports only os, syscall, unsafe, runtime, strconv and
// internal/procstat (errors, os, strconv), whose initialisers are
// the runtime's own or none: Go initialises, among the packages whose
// imports are done, the one of the lowest import path first, so this
// package's init runs straight after os's: before those of
// crypto/internal/fips140 and the hashes and ciphers, encoding/json,
// reflect, unicode, the other github.com/… packages and everything they
// import, which a shell's start never needs (a few low-level ones, such as
// crypto's own and encoding/base64's, run before it). Everything here must keep to those imports (internal/sandbox's
// TestShimInitFirst checks the order in its test binary).
package shellshim
