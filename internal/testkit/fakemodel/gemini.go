package fakemodel

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// geminiRequest is the part of a generateContent request the fake looks at.
type geminiRequest struct {
	Contents []struct {
		Parts []struct {
			FunctionResponse *struct {
				Response json.RawMessage `json:"response"`
			} `json:"functionResponse"`
		} `json:"parts"`
	} `json:"contents"`
}

// geminiRouting answers Gemini CLI's non-streaming side calls. With model
// "auto" it first asks a classifier for
// {complexity_reasoning, complexity_score 1..100}; other JSON side calls
// (such as a next-speaker check) get the keys they look for. Unknown keys
// are ignored by the CLI's schema checks.
const geminiRouting = `{"complexity_reasoning":"fakemodel","complexity_score":10,"reasoning":"fakemodel","next_speaker":"user"}`

// geminiAPI is the dialect of the Gemini API. Its side requests are told
// apart by method rather than by body, so the handler calls decode and take
// itself. A failing Turn's Retry-After header becomes the error's
// google.rpc.RetryInfo.
var geminiAPI = dialect[geminiRequest]{
	fail: func(w http.ResponseWriter, t Turn) {
		geminiError(w, t.Status, t.Message, geminiRetryInfo(t.Header)...)
	},
	toolResult: geminiToolResult,
}

func (s *Server) gemini(w http.ResponseWriter, r *http.Request, req Request) {
	// The path is /v1beta/models/{model}:{method}.
	rest := req.Path[strings.Index(req.Path, "/models/")+len("/models/"):]
	model, method, _ := strings.Cut(rest, ":")
	body, ok := geminiAPI.decode(s, w, r, req)
	if !ok {
		return
	}
	switch method {
	case "countTokens":
		s.record(req)
		writeJSON(w, http.StatusOK, obj{"totalTokens": inputTokens})
		return
	case "generateContent":
		s.record(req)
		writeJSON(w, http.StatusOK, obj{
			"candidates":    []obj{geminiCandidate([]obj{{"text": geminiRouting}}, true)},
			"usageMetadata": geminiUsage(),
			"modelVersion":  model,
		})
		return
	case "streamGenerateContent":
	default:
		s.record(req)
		geminiError(w, http.StatusNotFound, "fakemodel: unknown method "+method)
		return
	}

	t, ok := geminiAPI.take(s, w, req, body)
	if !ok {
		return
	}
	text := t.Text

	e := startSSE(w)
	chunk := func(parts []obj, last bool) {
		c := obj{"candidates": []obj{geminiCandidate(parts, last)}, "modelVersion": model}
		if last {
			c["usageMetadata"] = geminiUsage()
		}
		e.event("", c) // Gemini's SSE is data-only
	}
	ds := deltas(text)
	if t.Stall {
		for i, d := range ds {
			if !s.pace(r, t, i) {
				return
			}
			chunk([]obj{{"text": d}}, false)
		}
		s.stall(r)
		return
	}
	call, isCall := t.toolCall(Gemini)
	if len(ds) == 0 && !isCall {
		ds = []string{""}
	}
	for i, d := range ds {
		if !s.pace(r, t, i) {
			return
		}
		chunk([]obj{{"text": d}}, !isCall && i == len(ds)-1)
	}
	if isCall {
		chunk([]obj{{"functionCall": obj{"name": call.Name, "args": call.Input}}}, true)
	}
}

// geminiCandidate returns a candidate holding parts; the last one of a
// stream carries finishReason, without which the CLI reports an error.
func geminiCandidate(parts []obj, last bool) obj {
	c := obj{"content": obj{"role": "model", "parts": parts}, "index": 0}
	if last {
		c["finishReason"] = "STOP"
	}
	return c
}

func geminiUsage() obj {
	return obj{"promptTokenCount": inputTokens, "candidatesTokenCount": outputTokens,
		"totalTokenCount": inputTokens + outputTokens}
}

// geminiError answers with the Google API error JSON, with details when
// given (google.rpc.RetryInfo, QuotaFailure, ...).
func geminiError(w http.ResponseWriter, status int, message string, details ...obj) {
	name := "UNKNOWN"
	switch status {
	case http.StatusBadRequest:
		name = "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		name = "UNAUTHENTICATED"
	case http.StatusForbidden:
		name = "PERMISSION_DENIED"
	case http.StatusNotFound:
		name = "NOT_FOUND"
	case http.StatusTooManyRequests:
		name = "RESOURCE_EXHAUSTED"
	case http.StatusInternalServerError:
		name = "INTERNAL"
	case http.StatusServiceUnavailable:
		name = "UNAVAILABLE"
	}
	e := obj{"code": status, "message": message, "status": name}
	if len(details) > 0 {
		e["details"] = details
	}
	writeJSON(w, status, obj{"error": e})
}

// geminiRetryInfo returns the details a Google API error gives for a
// Retry-After header in whole seconds: the API itself says when to retry
// in a google.rpc.RetryInfo ({"retryDelay": "7s"}), which is what Gemini
// CLI reads, not the header.
func geminiRetryInfo(h http.Header) []obj {
	v := h.Get("Retry-After")
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return nil
	}
	return []obj{{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": strconv.Itoa(n) + "s"}}
}

// geminiToolResult returns the output of the last functionResponse in the
// request: its "output" field when it is a string, else its JSON.
func geminiToolResult(body geminiRequest) string {
	for i := len(body.Contents) - 1; i >= 0; i-- {
		parts := body.Contents[i].Parts
		for j := len(parts) - 1; j >= 0; j-- {
			fr := parts[j].FunctionResponse
			if fr == nil {
				continue
			}
			var out struct {
				Output *string `json:"output"`
			}
			if json.Unmarshal(fr.Response, &out) == nil && out.Output != nil {
				return *out.Output
			}
			return string(fr.Response)
		}
	}
	return ""
}
