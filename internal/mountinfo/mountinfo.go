// Package mountinfo decodes the fields of Linux's /proc/PID/mountinfo,
// which the cgroup levels and the sandbox both read to find mounts.
package mountinfo

import (
	"strconv"
	"strings"
)

// Unescape undoes mountinfo's octal escapes of a path field (\040 for a
// space, \011 a tab, \012 a newline, \134 a backslash); a backslash not
// followed by three octal digits stays as it is.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
