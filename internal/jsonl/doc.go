// Package jsonl reads the line-oriented output of agent CLIs: a [Reader]
// splits stdout into lines with no fixed line limit but with a memory cap, and
// a [Tail] keeps a bounded tail of stderr for error messages.
//
// The CLIs print one JSON value per line, and a single line can be many MiB
// (tool output, base64 images). A Reader returns such a line whole, in a slice
// of exactly its size that the caller owns, and keeps no large buffer after
// returning it. A line longer than the cap is not held in memory at all: its
// bytes are dropped as they arrive and the Reader reports a
// [*LineTooLongError] and goes on with the next line, so one oversized line
// never ends the stream.
//
// The package does not parse, validate or re-encode JSON, does not guess at
// record boundaries other than "\n", and does not retry failed reads; it only
// splits bytes into lines and bounds the memory that takes.
package jsonl
