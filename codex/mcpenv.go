package codex

import (
	"fmt"
	"strconv"
	"strings"
)

// nodeOptions is the variable that carries a sandboxed run's inspector
// option to its node processes (mcp.go).
const nodeOptions = "NODE_OPTIONS"

// envVars returns the names the last configuration override of extra for
// key gives (--config key=VALUE, --config=key=VALUE, -c key=VALUE), nil
// when none does, and an error when its value is not a TOML array of
// strings.
func envVars(extra []string, key string) ([]string, error) {
	var value string
	found := false
	for i := 0; i < len(extra); i++ {
		a := extra[i]
		switch {
		case (a == "-c" || a == "--config") && i+1 < len(extra):
			i++
			a = extra[i]
		case strings.HasPrefix(a, "--config="):
			a = strings.TrimPrefix(a, "--config=")
		case strings.HasPrefix(a, "-c") && len(a) > 2:
			a = strings.TrimPrefix(strings.TrimPrefix(a, "-c"), "=")
		default:
			continue
		}
		k, v, ok := strings.Cut(a, "=")
		if ok && strings.TrimSpace(k) == key {
			value, found = v, true
		}
	}
	if !found {
		return nil, nil
	}
	names, ok := tomlStrings(value)
	if !ok {
		return nil, fmt.Errorf("the override of %s is not an array of names", key)
	}
	return names, nil
}

// tomlStrings parses s as a one-line TOML array of basic ("...") or
// literal ('...') strings.
func tomlStrings(s string) ([]string, bool) {
	s = strings.TrimSpace(s)
	if len(s) < 2 || s[0] != '[' || s[len(s)-1] != ']' {
		return nil, false
	}
	rest := strings.TrimSpace(s[1 : len(s)-1])
	out := []string{}
	for rest != "" {
		var item string
		switch rest[0] {
		case '"':
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return nil, false
			}
			if item, err = strconv.Unquote(q); err != nil {
				return nil, false
			}
			rest = rest[len(q):]
		case '\'':
			end := strings.IndexByte(rest[1:], '\'')
			if end < 0 {
				return nil, false
			}
			item, rest = rest[1:1+end], rest[2+end:]
		default:
			return nil, false
		}
		out = append(out, item)
		rest = strings.TrimSpace(rest)
		if rest == "" {
			break
		}
		if rest[0] != ',' {
			return nil, false
		}
		rest = strings.TrimSpace(rest[1:])
	}
	return out, true
}

// addName returns names with name after them, unless they hold it.
func addName(names []string, name string) []string {
	for _, n := range names {
		if n == name {
			return names
		}
	}
	return append(names, name)
}
