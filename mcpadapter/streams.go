package mcpadapter

import (
	"bytes"
	"net/http"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultSSERetry is the reconnection delay that Tools.Handler gives the
// clients of resumable streams, when Options.SSERetry is zero.
const DefaultSSERetry = time.Second

// Resumable streams (SEP-1699, MCP 2025-11-25): with
// StreamableHTTPOptions.EventStore set, the SDK opens each SSE stream of a
// client of 2025-11-25 with a priming event, whose id the client sends back
// as Last-Event-ID to resume the stream after it dropped; the SDK replays
// what the client missed. Tools.Handler adds two things to it: the retry
// field of the priming event, which tells the client when to reconnect,
// and the session's protocol version for the requests of a session whose
// Mcp-Protocol-Version header names an older one (the SDK primes by the
// header, and a client of 2025-11-25 that sends another header still
// speaks 2025-11-25).

// resumableVersion reports whether the streams of protocol version v are
// resumable: from 2025-11-25 until 2026-07-28, which drops resumption.
func resumableVersion(v string) bool { return v >= "2025-11-25" && v < "2026-07-28" }

// streams returns h with the retry field on the priming events, and the
// requests of a session in its negotiated protocol version.
func (sh *shared) streams(h http.Handler) http.Handler {
	retry := []byte("retry: " + strconv.FormatInt(sh.cfg.sseRetry.Milliseconds(), 10) + "\n")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sid := r.Header.Get(sessionIDHeader); sid != "" && sh.server != nil {
			if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && v < "2025-11-25" {
				if nv := negotiated(sh.server, sid); resumableVersion(nv) {
					r.Header.Set("Mcp-Protocol-Version", nv)
				}
			}
		}
		h.ServeHTTP(&primingWriter{ResponseWriter: w, retry: retry}, r)
	})
}

// negotiated returns the protocol version of the session sid of s, or "".
func negotiated(s *mcp.Server, sid string) string {
	for ss := range s.Sessions() {
		if ss.ID() == sid {
			if p := ss.InitializeParams(); p != nil {
				return p.ProtocolVersion
			}
			return ""
		}
	}
	return ""
}

// primePrefix is how the SDK's priming event begins.
var primePrefix = []byte("event: prime\n")

// A primingWriter adds the retry field to the priming event of an SSE
// stream: the first write of the response, when it is one.
type primingWriter struct {
	http.ResponseWriter
	retry   []byte
	written bool
}

func (p *primingWriter) Write(b []byte) (int, error) {
	if p.written || !bytes.HasPrefix(b, primePrefix) {
		p.written = true
		return p.ResponseWriter.Write(b)
	}
	p.written = true
	out := make([]byte, 0, len(b)+len(p.retry))
	out = append(out, primePrefix...)
	out = append(out, p.retry...)
	out = append(out, b[len(primePrefix):]...)
	if _, err := p.ResponseWriter.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Unwrap gives http.ResponseController the writer underneath, to flush.
func (p *primingWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }

// Flush flushes the writer underneath.
func (p *primingWriter) Flush() {
	if f, ok := p.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
