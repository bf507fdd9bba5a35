// Package procstat reads Linux's /proc/PID/stat: the fields after the command
// name that the module's process tracking needs. It imports only errors,
// os and strconv (not bytes, which imports unicode), as the sandbox's
// shell shim parses a stat line in its init, which runs right after os's.
package procstat
