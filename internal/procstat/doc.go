// Package procstat reads Linux's /proc/PID/stat: the fields after the command
// name that the module's process tracking needs. It imports only bytes,
// errors, os and strconv, as the sandbox's shell shim parses a stat line
// in its init, before the program's own packages are set up.
package procstat
