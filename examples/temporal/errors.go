package agentflow

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/clinvoke/clinvoke/invoker"
)

// The types of the application errors RunTurn returns (ApplicationError.Type),
// one per cause a retry policy may want to treat apart
// (temporal.RetryPolicy.NonRetryableErrorTypes).
const (
	// Retryable: the model API refused for rate or quota limits. The
	// error's NextRetryDelay is the CLI's reset time, where it gave one.
	ErrorTypeRateLimited = "RateLimited"
	// Retryable: anything else that went wrong in the run (the CLI failed,
	// exited, printed no result, stalled past a timeout, lost its session).
	ErrorTypeAgentFailed = "AgentFailed"
	// Retryable: the worker stopped (past worker.Options.WorkerStopTimeout)
	// while the turn ran; the next attempt resumes its session.
	ErrorTypeWorkerStopped = "WorkerStopped"

	// Not retryable: the same input fails the same way on every attempt.
	ErrorTypeInvalidRequest = "InvalidRequest" // also ErrUnsupported, ErrContainment
	ErrorTypeNotInstalled   = "NotInstalled"
	ErrorTypeAuthRequired   = "AuthRequired"
	ErrorTypeSchema         = "SchemaMismatch"
	ErrorTypeLimit          = "LimitReached" // MaxTurns, MaxBudgetUSD
	ErrorTypeLineTooLong    = "LineTooLong"
)

// Classify turns an error of a clinvoke turn into the Temporal error RunTurn
// returns, with last (the turn's last Progress) as its details:
//
//   - rate limits are retryable, after the CLI's reset time when its message
//     gives one (NextRetryDelay; the retry policy's interval otherwise);
//   - invalid or unsupported requests, a missing CLI, missing credentials, an
//     answer that does not satisfy the schema, a turn or budget limit and a
//     line over the line limit are not: another attempt with the same input
//     fails the same way (a LimitError's conversation is intact: resume it
//     with a new turn, not a retry);
//   - everything else (the CLI failed or exited, a timeout) is retryable.
//
// A lost worker never reaches Classify: the server retries the activity when
// its heartbeat times out.
func Classify(err error, last Progress) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	nonRetryable := func(typ string) error {
		return temporal.NewNonRetryableApplicationError(msg, typ, nil, last)
	}
	var schema *invoker.SchemaError
	var limit *invoker.LimitError
	switch {
	case errors.Is(err, invoker.ErrRateLimited):
		return temporal.NewApplicationErrorWithOptions(msg, ErrorTypeRateLimited, temporal.ApplicationErrorOptions{
			NextRetryDelay: ResetDelay(msg, time.Now()),
			Details:        []any{last},
		})
	case errors.Is(err, invoker.ErrNotInstalled):
		return nonRetryable(ErrorTypeNotInstalled)
	case errors.Is(err, invoker.ErrInvalidRequest), errors.Is(err, invoker.ErrUnsupported),
		errors.Is(err, invoker.ErrContainment):
		return nonRetryable(ErrorTypeInvalidRequest)
	case errors.Is(err, invoker.ErrAuthRequired):
		return nonRetryable(ErrorTypeAuthRequired)
	case errors.As(err, &schema):
		return nonRetryable(ErrorTypeSchema)
	case errors.As(err, &limit):
		return nonRetryable(ErrorTypeLimit)
	case errors.Is(err, invoker.ErrLineTooLong):
		return nonRetryable(ErrorTypeLineTooLong)
	}
	return temporal.NewApplicationErrorWithOptions(msg, ErrorTypeAgentFailed, temporal.ApplicationErrorOptions{
		Details: []any{last},
	})
}

var (
	// Claude Code's usage limit: "Claude AI usage limit reached|1767225600",
	// the reset as a Unix time.
	resetEpochRE = regexp.MustCompile(`limit reached\|(\d{9,11})\b`)
	// Codex and the model APIs behind the CLIs: "try again in 1m20s",
	// "Please try again in 2 hours 5 minutes", "Please retry in 12.5s".
	retryInRE = regexp.MustCompile(`(?i)(?:try again|retry) in\s+((?:[0-9]+(?:\.[0-9]+)?\s*[a-z]+[\s,]*(?:and\s+)?)+)`)
	// Gemini's API error details: "retryDelay": "12s".
	retryDelayRE = regexp.MustCompile(`"retryDelay"\s*:\s*"([0-9]+(?:\.[0-9]+)?)s"`)
	durationPart = regexp.MustCompile(`([0-9]+(?:\.[0-9]+)?)\s*([a-z]+)`)
)

// ResetDelay returns how long the CLI's rate-limit message msg says to wait,
// counted from now, or 0 when it gives no time it can be read from. It
// knows the forms the CLIs print: Claude Code's "limit reached|UNIX_TIME",
// "try again in 1m20s" or "in 2 hours 5 minutes", and Gemini's retryDelay.
func ResetDelay(msg string, now time.Time) time.Duration {
	if m := resetEpochRE.FindStringSubmatch(msg); m != nil {
		sec, _ := strconv.ParseInt(m[1], 10, 64)
		if d := time.Unix(sec, 0).Sub(now); d > 0 {
			return d
		}
		return 0
	}
	if m := retryDelayRE.FindStringSubmatch(msg); m != nil {
		f, _ := strconv.ParseFloat(m[1], 64)
		return time.Duration(f * float64(time.Second))
	}
	if m := retryInRE.FindStringSubmatch(msg); m != nil {
		var total time.Duration
		for _, part := range durationPart.FindAllStringSubmatch(strings.ToLower(m[1]), -1) {
			f, _ := strconv.ParseFloat(part[1], 64)
			unit, ok := unitOf(part[2])
			if !ok {
				// "1m20s" is one token to durationPart: let Go parse it.
				if d, err := time.ParseDuration(part[0]); err == nil {
					total += d
				}
				continue
			}
			total += time.Duration(f * float64(unit))
		}
		return total
	}
	return 0
}

func unitOf(word string) (time.Duration, bool) {
	switch strings.TrimSuffix(word, "s") {
	case "m", "ms", "millisecond":
		if word == "m" {
			return time.Minute, true
		}
		return time.Millisecond, true
	case "", "sec", "second":
		return time.Second, true
	case "min", "minute":
		return time.Minute, true
	case "h", "hr", "hour":
		return time.Hour, true
	case "d", "day":
		return 24 * time.Hour, true
	}
	return 0, false
}
