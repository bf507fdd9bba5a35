package fakeagent

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// obj is a JSON object whose fields keep their order, so the fake's lines
// read like the real CLIs' (json.Marshal of a map sorts the keys).
type obj []kv

type kv struct {
	k string
	v any
}

func (o obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := encode(&b, f.k); err != nil {
			return nil, err
		}
		b.WriteByte(':')
		if err := encode(&b, f.v); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// encode appends v as JSON without HTML escaping (Node's JSON.stringify,
// which the real CLIs use, does not escape <, > and &).
func encode(b *bytes.Buffer, v any) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	b.Truncate(b.Len() - 1) // Encode's newline
	return nil
}

// marshal returns v as JSON without HTML escaping.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	err := encode(&b, v)
	return b.Bytes(), err
}

// mustMarshal marshals an event built by this package.
func mustMarshal(v any) []byte {
	b, err := marshal(v)
	if err != nil {
		panic("fakeagent: " + err.Error())
	}
	return b
}

// fillerMark stands for filler text in an event; withFiller replaces it.
const fillerMark = "@@fakeagent-filler@@"

// fillerText is repeated to make filler: printable ASCII that JSON does
// not escape, so n bytes of filler are n bytes of the line.
const fillerText = "The quick brown fox jumps over the lazy dog. 0123456789 "

// withFiller marshals ev, whose string fields hold fillerMark one or more
// times, replacing the marks by filler so that the line is size bytes long
// (or as short as possible when size is smaller than the event).
func withFiller(ev any, size int) []byte {
	b := mustMarshal(ev)
	mark := []byte(fillerMark)
	n := bytes.Count(b, mark)
	room := max(0, size-(len(b)-n*len(mark)))
	out := make([]byte, 0, len(b)-n*len(mark)+room+1) // +1: the newline
	for i := range n {
		j := bytes.Index(b, mark)
		out = append(out, b[:j]...)
		k := room / n
		if i < room%n {
			k++
		}
		for k > 0 {
			c := min(k, len(fillerText))
			out = append(out, fillerText[:c]...)
			k -= c
		}
		b = b[j+len(mark):]
	}
	return append(out, b...)
}

// uuid4 returns a random (version 4) UUID, as Gemini and Claude use.
func uuid4() string {
	var u [16]byte
	rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return formatUUID(u)
}

// uuid7 returns a time-ordered (version 7) UUID, as Codex uses for
// thread ids.
func uuid7() string {
	var u [16]byte
	rand.Read(u[:])
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(time.Now().UnixMilli()))
	copy(u[:6], ms[2:])
	u[6] = u[6]&0x0f | 0x70
	u[8] = u[8]&0x3f | 0x80
	return formatUUID(u)
}

func formatUUID(u [16]byte) string {
	h := hex.EncodeToString(u[:])
	return fmt.Sprintf("%s-%s-%s-%s-%s", h[0:8], h[8:12], h[12:16], h[16:20], h[20:32])
}

// randHex returns n random bytes in hex.
func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
