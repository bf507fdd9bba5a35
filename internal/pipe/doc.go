// Package pipe holds what the engine needs of the operating system for the
// CLI's standard streams, per OS behind build tags: a pseudo-terminal for
// PTY mode (OpenPTY, IsPTYEnd), how much a pipe holds unread (Buffered),
// and a pipe's capacity (SetSize).
package pipe
