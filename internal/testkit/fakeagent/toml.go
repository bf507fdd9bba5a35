package fakeagent

import (
	"errors"
	"strconv"
	"strings"
)

// parseTOMLValue parses the value of a Codex -c option as TOML: a string
// (basic or literal), a boolean, a number, an array or an inline table.
// Codex takes a value that does not parse as the literal string; so does
// the fake, on an error.
func parseTOMLValue(s string) (any, error) {
	p := &tomlParser{s: s}
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	if p.skip(); p.i != len(p.s) {
		return nil, errors.New("toml: trailing characters")
	}
	return v, nil
}

type tomlParser struct {
	s string
	i int
}

func (p *tomlParser) skip() {
	for p.i < len(p.s) && strings.ContainsRune(" \t\r\n", rune(p.s[p.i])) {
		p.i++
	}
}

func (p *tomlParser) value() (any, error) {
	p.skip()
	if p.i >= len(p.s) {
		return nil, errors.New("toml: missing value")
	}
	switch c := p.s[p.i]; {
	case c == '"' || c == '\'':
		return p.str()
	case c == '[':
		p.i++
		var arr []any
		for {
			p.skip()
			if p.i < len(p.s) && p.s[p.i] == ']' {
				p.i++
				return arr, nil
			}
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
			p.skip()
			if p.i < len(p.s) && p.s[p.i] == ',' {
				p.i++
			}
		}
	case c == '{':
		p.i++
		tab := map[string]any{}
		for {
			p.skip()
			if p.i < len(p.s) && p.s[p.i] == '}' {
				p.i++
				return tab, nil
			}
			key, err := p.key()
			if err != nil {
				return nil, err
			}
			p.skip()
			if p.i >= len(p.s) || p.s[p.i] != '=' {
				return nil, errors.New("toml: want = in an inline table")
			}
			p.i++
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			setPath(tab, key, v)
			p.skip()
			if p.i < len(p.s) && p.s[p.i] == ',' {
				p.i++
			}
		}
	}
	j := p.i
	for j < len(p.s) && !strings.ContainsRune(",]} \t\r\n", rune(p.s[j])) {
		j++
	}
	word := p.s[p.i:j]
	p.i = j
	switch word {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	if n, err := strconv.ParseInt(strings.ReplaceAll(word, "_", ""), 10, 64); err == nil {
		return n, nil
	}
	if f, err := strconv.ParseFloat(strings.ReplaceAll(word, "_", ""), 64); err == nil {
		return f, nil
	}
	return nil, errors.New("toml: bad value " + strconv.Quote(word))
}

// key parses a key of an inline table: bare, quoted or dotted.
func (p *tomlParser) key() (string, error) {
	var parts []string
	for {
		p.skip()
		if p.i < len(p.s) && (p.s[p.i] == '"' || p.s[p.i] == '\'') {
			s, err := p.str()
			if err != nil {
				return "", err
			}
			parts = append(parts, s)
		} else {
			j := p.i
			for j < len(p.s) && (p.s[j] == '_' || p.s[j] == '-' || p.s[j] >= '0' && p.s[j] <= '9' || p.s[j]|0x20 >= 'a' && p.s[j]|0x20 <= 'z') {
				j++
			}
			if j == p.i {
				return "", errors.New("toml: bad key")
			}
			parts = append(parts, p.s[p.i:j])
			p.i = j
		}
		p.skip()
		if p.i < len(p.s) && p.s[p.i] == '.' {
			p.i++
			continue
		}
		return strings.Join(parts, "."), nil
	}
}

// str parses a basic ("...", with escapes) or literal ('...') string.
func (p *tomlParser) str() (string, error) {
	q := p.s[p.i]
	p.i++
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		p.i++
		switch {
		case c == q:
			return b.String(), nil
		case c == '\\' && q == '"' && p.i < len(p.s):
			e := p.s[p.i]
			p.i++
			switch e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case 'u', 'U':
				n := 4
				if e == 'U' {
					n = 8
				}
				if p.i+n > len(p.s) {
					return "", errors.New("toml: short escape")
				}
				r, err := strconv.ParseUint(p.s[p.i:p.i+n], 16, 32)
				if err != nil {
					return "", err
				}
				b.WriteRune(rune(r))
				p.i += n
			default:
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", errors.New("toml: unterminated string")
}
