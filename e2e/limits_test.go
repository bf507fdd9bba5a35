//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clinvoke/clinvoke/internal/testkit/fakemodel"
	"github.com/clinvoke/clinvoke/invoker"
)

// The limits of a session, on each real CLI: a shell tool that allocates
// past the session's memory limit is killed by the kernel, the CLI lives
// on and reports the failed tool, the next turn answers, and each turn's
// Result says what it used. docs/limits.md records what each CLI did.

// requireLimit fails (in CI, as root) or skips the test where inv cannot
// hold a limit on field.
func requireLimit(t *testing.T, inv invoker.Invoker, field string) {
	t.Helper()
	c := inv.Capabilities()
	if slices.Contains(strings.Fields(c.Limits), field) {
		return
	}
	if os.Getenv("CI") == "true" && os.Geteuid() == 0 {
		t.Fatalf("Capabilities.Limits = %q, want %s: CI runs as root, where limits must work (%s)", c.Limits, field, c.LimitsNote)
	}
	t.Skipf("no %s limit on this host: %s", field, c.LimitsNote)
}

// sessionMemory is the memory limit of the sessions below: room for each
// CLI (Node.js CLIs hold 150 to 400 MiB) and for a tool larger than it, so
// that the kernel's OOM killer takes the tool, the largest process.
const sessionMemory = 1536 << 20

// memoryHog buffers 4 GiB in tail: on every machine, with no interpreter.
const memoryHog = "head -c 4G /dev/zero | tail -c 4G > /dev/null"

func TestLimitsSessionToolOverMemory(t *testing.T) {
	forEachSessionRig(t, clis, func(t *testing.T, r *rig) {
		requireLimit(t, r.inv, "Memory")
		// Unlimited: Claude Code's default mode asks before a pipeline,
		// and the limit, not a sandbox, is what is tested.
		sreq := invoker.Request{Workdir: r.workdir, Model: r.cli.model, Permission: invoker.Unlimited}.Session()
		sreq.Limits = invoker.Limits{Memory: sessionMemory}
		s := r.openSession(t, r.inv, sreq)
		r.srv.Enqueue(fakemodel.Shell(memoryHog), fakemodel.EchoToolResult("the tool said: "), fakemodel.Answer("still here"))

		var mu sync.Mutex
		var warnings, results []string
		onEvent := func(ev invoker.Event) {
			mu.Lock()
			defer mu.Unlock()
			switch ev.Kind {
			case invoker.KindWarning:
				warnings = append(warnings, ev.Text)
			case invoker.KindToolResult:
				if ev.Tool != nil {
					results = append(results, fmt.Sprintf("%s %q", ev.Tool.Status, snippet(ev.Tool.Output)))
				}
			}
		}
		res, err := s.Turn(turnCtx(t), invoker.TurnRequest{Prompt: "allocate a lot", OnEvent: onEvent})
		if err != nil {
			t.Fatalf("the turn of the hog: %v, want the CLI alive to answer; stderr:\n%s", err, res.Stderr)
		}
		mu.Lock()
		t.Logf("%s: tool results %v; warnings %q; answer %q; resources %+v", r.cli.name, results, warnings, snippet(res.Text), res.Resources)
		warned := slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, "memory limit of 1.5 GiB") })
		mu.Unlock()
		if !warned {
			t.Errorf("no KindWarning naming the memory limit; warnings: %q", warnings)
		}
		if !strings.HasPrefix(res.Text, "the tool said: ") {
			t.Errorf("answer %q, want the model's answer after the tool's result", res.Text)
		}
		if u := res.Resources; u.OOMKills < 1 || u.PeakMemory < sessionMemory*3/4 || u.PeakMemory > sessionMemory+1<<20 || u.Sampled {
			t.Errorf("Resources = %+v, want an OOM kill and a peak near the limit, counted by the kernel", u)
		}
		next, err := s.Turn(turnCtx(t), invoker.TurnRequest{Prompt: "and now"})
		if err != nil || next.Text != "still here" {
			t.Fatalf("the next turn: %v, %q; want the CLI to answer", err, next.Text)
		}
		t.Logf("%s: the next turn used %+v", r.cli.name, next.Resources)
		if next.Resources.OOMKills != 0 || next.Resources.CPUTime <= 0 {
			t.Errorf("the next turn's Resources = %+v, want its own CPU time and no OOM kill", next.Resources)
		}
	})
}

// snippet shortens s for a log line.
func snippet(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 160 {
		return s[:160] + "…"
	}
	return s
}

// A run that fails rate limited, with the reset time the CLI read from the
// fake model's 429, closes its backend's gate (Budget.WaitRateLimits): the
// next run waits there, told when it opens, starts after, and answers.
// Each CLI is rate limited the way it reports a reset (see its
// live_<cli>_test.go): Codex from the rate-limit headers of an earlier
// answer of its session, Gemini CLI from the 429's RetryInfo, Claude Code
// with a claude.ai login from the unified rate-limit headers.
func TestLimitsRateLimitGate(t *testing.T) {
	forEachRig(t, clis, func(t *testing.T, r *rig) {
		opts := r.opts
		opts.Budget = &invoker.Budget{WaitRateLimits: true}
		inv := r.cli.new(opts)
		resets := rateLimitOnce(t, r, inv)
		t.Logf("%s: rate limited until %v (%v from now)", r.cli.name, resets, time.Until(resets).Round(time.Millisecond))

		r.srv.Enqueue(fakemodel.Answer("after the reset"))
		req := r.request("and now")
		var mu sync.Mutex
		var queued []invoker.Event
		var started time.Time
		req.OnEvent = func(ev invoker.Event) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case ev.Kind == invoker.KindQueued:
				queued = append(queued, ev)
			case started.IsZero():
				started = time.Now()
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		res, err := inv.Invoke(ctx, req)
		if err != nil || res.Text != "after the reset" {
			t.Fatalf("the next run: %v, %q", err, res.Text)
		}
		mu.Lock()
		defer mu.Unlock()
		t.Logf("%s: the next run waited %v, %d KindQueued events, started %v after the reset", r.cli.name, res.Queued, len(queued), started.Sub(resets))
		if len(queued) == 0 || queued[0].RateLimit == nil || !queued[0].RateLimit.ResetsAt.Equal(resets) {
			t.Errorf("KindQueued events %s, want one at the gate until %v", jsonString(queued), resets)
		}
		if started.Before(resets) || res.Queued <= 0 {
			t.Errorf("the next run started at %v (queued %v), before the reset at %v", started, res.Queued, resets)
		}
	})
}

// rateLimitOnce makes a run (or a session's turn) of inv fail rate
// limited, with a reset a few seconds ahead, and returns the reset.
func rateLimitOnce(t *testing.T, r *rig, inv invoker.Invoker) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var err error
	switch r.cli.name {
	case "gemini":
		writeFile(t, filepath.Join(r.home, ".gemini", "settings.json"), `{
  "security": {"auth": {"selectedType": "gemini-api-key"}},
  "general": {"maxAttempts": 2},
  "privacy": {"usageStatisticsEnabled": false}
}
`)
		limited := fakemodel.Turn{Status: http.StatusTooManyRequests, Message: "Resource has been exhausted (e.g. check quota).",
			Header: http.Header{"Retry-After": {"2"}}}
		r.srv.Enqueue(limited, limited)
		_, err = inv.Invoke(ctx, r.request("hi"))
	case "claude":
		resets := time.Now().Add(3 * time.Second).Truncate(time.Second)
		r.srv.Enqueue(fakemodel.Turn{Status: http.StatusTooManyRequests, Message: "rate limited", Header: http.Header{
			"Anthropic-Ratelimit-Unified-Status":               {"rejected"},
			"Anthropic-Ratelimit-Unified-Reset":                {strconv.FormatInt(resets.Unix(), 10)},
			"Anthropic-Ratelimit-Unified-Representative-Claim": {"five_hour"},
		}})
		req := r.request("hi")
		req.Env = []string{"ANTHROPIC_API_KEY=", "CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-fakemodel", "CLAUDE_CODE_MAX_RETRIES=1"}
		_, err = inv.Invoke(ctx, req)
	case "codex":
		cfg := filepath.Join(r.home, ".codex", "config.toml")
		b, rerr := os.ReadFile(cfg)
		if rerr != nil {
			t.Fatal(rerr)
		}
		writeFile(t, cfg, strings.NewReplacer("request_max_retries = 0", "request_max_retries = 1",
			"stream_max_retries = 0", "stream_max_retries = 1").Replace(string(b)))
		resets := time.Now().Add(4 * time.Second).Truncate(time.Second)
		refused := fakemodel.Turn{Status: http.StatusTooManyRequests, Message: "Rate limit reached for requests",
			Header: http.Header{"Retry-After": {"1"}}}
		r.srv.Enqueue(fakemodel.Turn{Text: "plenty left", Header: rateHeaders(resets)}, refused, refused)
		s, oerr := inv.OpenSession(ctx, r.sessionRequest(invoker.ReadOnly))
		if oerr != nil {
			t.Fatalf("OpenSession: %v", oerr)
		}
		if _, terr := s.Turn(ctx, invoker.TurnRequest{Prompt: "first"}); terr != nil {
			t.Fatalf("first Turn: %v", terr)
		}
		_, err = s.Turn(ctx, invoker.TurnRequest{Prompt: "second"})
		r.closeAndCheck(t, s)
	default:
		t.Skipf("no rate-limit script for %s", r.cli.name)
	}
	var le *invoker.LimitError
	if !errors.As(err, &le) || !errors.Is(err, invoker.ErrRateLimited) || le.ResetsAt.IsZero() {
		t.Fatalf("error = %v, want a *LimitError for the rate limit with its reset", err)
	}
	if ps := r.survivors(); len(ps) > 0 {
		t.Errorf("processes of the rate-limited run alive:\n%s", strings.Join(ps, "\n"))
	}
	return le.ResetsAt
}
