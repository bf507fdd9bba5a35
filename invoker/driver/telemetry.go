package driver

// Telemetry: what the engine records through the OpenTelemetry API. The
// library imports the API only (otel, otel/trace, otel/metric): the host
// program installs an SDK and exporters, or nothing, in which case the
// global providers record nothing and the calls below cost a few
// nanoseconds per run.
//
// Names follow OpenTelemetry's semantic conventions where they have one
// (the GenAI conventions for the agent, model, tokens and operation; error.type,
// process.pid, process.exit.code); ours are under the prefix "clinvoke.".
// The keys are written out rather than imported from a semconv package:
// the GenAI conventions are still in development and move between
// semconv versions, and these strings are what exporters see.

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/clinvoke/clinvoke/internal/proc"
	"github.com/clinvoke/clinvoke/invoker"
)

// scope is the instrumentation scope of the engine's tracer and meter.
const scope = "github.com/clinvoke/clinvoke"

// Attribute keys. The gen_ai.*, error.type and process.* keys are
// OpenTelemetry semantic conventions; clinvoke.* are ours.
const (
	keyOperation    = attribute.Key("gen_ai.operation.name")
	keyProvider     = attribute.Key("gen_ai.provider.name")
	keyAgent        = attribute.Key("gen_ai.agent.name")
	keyModel        = attribute.Key("gen_ai.request.model")
	keyConversation = attribute.Key("gen_ai.conversation.id")
	keyInputTokens  = attribute.Key("gen_ai.usage.input_tokens")
	keyOutputTokens = attribute.Key("gen_ai.usage.output_tokens")
	keyTokenType    = attribute.Key("gen_ai.token.type")
	keyToolName     = attribute.Key("gen_ai.tool.name")
	keyToolCallID   = attribute.Key("gen_ai.tool.call.id")
	keyErrorType    = attribute.Key("error.type")
	keyPID          = attribute.Key("process.pid")
	keyExitCode     = attribute.Key("process.exit.code")

	keyCLI         = attribute.Key("clinvoke.cli")
	keyMode        = attribute.Key("clinvoke.mode")
	keyPermission  = attribute.Key("clinvoke.permission")
	keyContainment = attribute.Key("clinvoke.containment")
	keyOutcome     = attribute.Key("clinvoke.outcome")
	keySignal      = attribute.Key("clinvoke.exit.signal")
	keyReason      = attribute.Key("clinvoke.stop.reason")
	keyKilled      = attribute.Key("clinvoke.sweep.killed")
	keySurvivors   = attribute.Key("clinvoke.sweep.survivors")
	keyCost        = attribute.Key("clinvoke.cost_usd")
	keyTurns       = attribute.Key("clinvoke.turns")
	keyOutputCut   = attribute.Key("clinvoke.output_cut")
	// keySignalIgnored marks a ladder step not taken: the CLI ignores
	// its signal.
	keySignalIgnored = attribute.Key("clinvoke.signal.ignored")
)

// The modes of clinvoke.mode: a run of Invoke, a turn of a session, and
// the session's process itself.
const (
	modeInvoke  = "invoke"
	modeTurn    = "turn"
	modeSession = "session"
)

// The outcomes of clinvoke.outcome, one word for each way a run or turn
// ends (docs/observability.md says what each means).
const (
	outcomeAnswered    = "answered"
	outcomeCancelled   = "cancelled"
	outcomeDeadline    = "deadline"
	outcomeTimeout     = "timeout"
	outcomeRateLimited = "rate_limited"
	outcomeAuth        = "auth_required"
	outcomeLimit       = "limit"
	outcomeResource    = "resource_limit"
	outcomeRejected    = "rejected"
	outcomeFailed      = "failed"
	outcomePanic       = "panic"
	outcomeClosed      = "closed" // a session closed without error
)

// outcome names how a run, a turn or a session ended, from its error: the
// value of the clinvoke.outcome attribute. panicked is true when OnEvent
// panicked.
func outcome(err error, panicked bool) string {
	switch {
	case panicked:
		return outcomePanic
	case err == nil:
		return outcomeAnswered
	case errors.Is(err, context.Canceled):
		return outcomeCancelled
	case errors.Is(err, context.DeadlineExceeded):
		return outcomeDeadline
	case errors.Is(err, invoker.ErrFirstEventTimeout), errors.Is(err, invoker.ErrIdleTimeout):
		return outcomeTimeout
	case errors.Is(err, invoker.ErrResourceLimit):
		// Before what the CLI said, which a *LimitError of the kernel's
		// evidence keeps in its chain (an authentication failure, say).
		return outcomeResource
	case errors.Is(err, invoker.ErrRateLimited):
		return outcomeRateLimited
	case errors.Is(err, invoker.ErrAuthRequired):
		return outcomeAuth
	case errors.Is(err, invoker.ErrMaxTurns), errors.Is(err, invoker.ErrMaxBudget):
		return outcomeLimit
	case errors.Is(err, invoker.ErrInvalidRequest), errors.Is(err, invoker.ErrNotInstalled),
		errors.Is(err, invoker.ErrContainment), errors.Is(err, invoker.ErrTurnInProgress):
		return outcomeRejected
	}
	return outcomeFailed
}

// provider is gen_ai.provider.name for a CLI: the API its model runs on.
func provider(cli string) string {
	switch cli {
	case "codex":
		return "openai"
	case "claude":
		return "anthropic"
	case "gemini":
		return "gcp.gemini"
	}
	return cli
}

// Bucket boundaries, in seconds: agent turns last seconds to tens of
// minutes, first events come within seconds, a stop within the graces.
var (
	durationBuckets = []float64{0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600}
	firstBuckets    = []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120}
	stopBuckets     = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 1.5, 2, 3, 5, 10}
	tokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
)

// telemetry is an engine's tracer and instruments, made once per Invoker,
// with the attribute sets of its measurements made in advance (see bind):
// without an SDK, a run then allocates little more than its span.
type telemetry struct {
	tracer trace.Tracer
	cli    string

	runName, sessionName string
	startOpts            []trace.SpanStartOption
	cliOpt               mopts
	modeOpt              map[string]mopts            // by mode
	endOpt               map[string]map[string]mopts // by mode, outcome
	stopOpt              map[string]mopts            // by stop reason
	usageOpts            sync.Map                    // model → *usageOpts
	models               atomic.Int32                // entries in usageOpts

	started   metric.Int64Counter
	ended     metric.Int64Counter
	active    metric.Int64UpDownCounter
	sessions  metric.Int64UpDownCounter
	duration  metric.Float64Histogram
	first     metric.Float64Histogram
	stop      metric.Float64Histogram
	swept     metric.Int64Counter
	survivors metric.Int64Counter
	tokens    metric.Int64Histogram
	cost      metric.Float64Counter
	res       resourceInstruments
	admitOnce sync.Once
	admitOpt  [2]mopts // clinvoke.run.queued, not admitted and admitted
	waitOpt   mopts    // clinvoke.runs.waiting
}

// newTelemetry makes the tracer and the instruments from the providers of
// invoker.Options, or otel's global ones where they are nil. An
// instrument the provider refuses is replaced by a no-op by the API.
func newTelemetry(tp trace.TracerProvider, mp metric.MeterProvider) *telemetry {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(scope)
	t := &telemetry{tracer: tp.Tracer(scope)}
	t.started, _ = m.Int64Counter("clinvoke.runs.started", metric.WithUnit("{run}"),
		metric.WithDescription("Runs and session turns started."))
	t.ended, _ = m.Int64Counter("clinvoke.runs.ended", metric.WithUnit("{run}"),
		metric.WithDescription("Runs and session turns ended, by clinvoke.outcome."))
	t.active, _ = m.Int64UpDownCounter("clinvoke.runs.active", metric.WithUnit("{run}"),
		metric.WithDescription("Runs and session turns in flight."))
	t.sessions, _ = m.Int64UpDownCounter("clinvoke.sessions.active", metric.WithUnit("{session}"),
		metric.WithDescription("Sessions whose CLI process is running."))
	t.duration, _ = m.Float64Histogram("clinvoke.run.duration", metric.WithUnit("s"),
		metric.WithDescription("Wall time of a run or turn, from the call to its return (the tree reaped)."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	t.first, _ = m.Float64Histogram("clinvoke.run.first_event", metric.WithUnit("s"),
		metric.WithDescription("Time from a run's or turn's start to the CLI's first event."),
		metric.WithExplicitBucketBoundaries(firstBuckets...))
	t.stop, _ = m.Float64Histogram("clinvoke.stop.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from the decision to stop a CLI (cancel, timeout, fatal error) to its whole process tree gone."),
		metric.WithExplicitBucketBoundaries(stopBuckets...))
	t.swept, _ = m.Int64Counter("clinvoke.sweep.processes", metric.WithUnit("{process}"),
		metric.WithDescription("Processes killed by the sweep after the CLI exited or was stopped: descendants it left behind."))
	t.survivors, _ = m.Int64Counter("clinvoke.sweep.survivors", metric.WithUnit("{process}"),
		metric.WithDescription("Processes still alive after the sweep's SIGKILL. Must stay 0."))
	t.tokens, _ = m.Int64Histogram("gen_ai.client.token.usage", metric.WithUnit("{token}"),
		metric.WithDescription("Tokens used by a run or turn, by gen_ai.token.type, as the CLI reported them."),
		metric.WithExplicitBucketBoundaries(tokenBuckets...))
	t.cost, _ = m.Float64Counter("clinvoke.cost", metric.WithUnit("{USD}"),
		metric.WithDescription("Cost the CLI reported for its runs and turns (Claude Code), in US dollars."))
	t.res = newResourceInstruments(m)
	t.startOpts = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}
	return t
}

// mopts are the options of a measurement with one attribute set, made in
// advance as slices: passed with ..., they are not copied.
type mopts struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

func newMopts(kv ...attribute.KeyValue) mopts {
	o := metric.WithAttributeSet(attribute.NewSet(kv...))
	return mopts{add: []metric.AddOption{o}, rec: []metric.RecordOption{o}}
}

// allOutcomes are the values of clinvoke.outcome.
var allOutcomes = []string{outcomeAnswered, outcomeCancelled, outcomeDeadline, outcomeTimeout, outcomeRateLimited,
	outcomeAuth, outcomeLimit, outcomeResource, outcomeRejected, outcomeFailed, outcomePanic, outcomeClosed}

// bind makes the attribute sets of the measurements of cli's runs. New
// calls it once, with the backend's name.
func (t *telemetry) bind(cli string) {
	if t == nil {
		return
	}
	t.cli = cli
	t.runName, t.sessionName = "invoke_agent "+cli, "session "+cli
	c := keyCLI.String(cli)
	t.cliOpt = newMopts(c)
	t.modeOpt = map[string]mopts{}
	t.endOpt = map[string]map[string]mopts{}
	t.stopOpt = map[string]mopts{}
	for _, mode := range []string{modeInvoke, modeTurn} {
		m := keyMode.String(mode)
		t.modeOpt[mode] = newMopts(c, m)
		t.endOpt[mode] = map[string]mopts{}
		for _, o := range allOutcomes {
			t.endOpt[mode][o] = newMopts(c, m, keyOutcome.String(o))
		}
	}
	for _, o := range allOutcomes {
		t.stopOpt[o] = newMopts(c, keyReason.String(o))
	}
}

// usageOpts are the attribute sets of the token and cost measurements of
// one model.
type usageOpts struct{ input, output, cost mopts }

// maxModels bounds the models that get series of their own: the model is
// a tool argument an MCP client chooses. Others are counted as "_OTHER",
// the semantic conventions' word for an overflow.
const (
	maxModels  = 64
	otherModel = "_OTHER"
)

// usage returns the attribute sets of model's tokens and cost, made once
// per model.
func (t *telemetry) usage(model string) *usageOpts {
	if u, ok := t.usageOpts.Load(model); ok {
		return u.(*usageOpts)
	}
	if model != otherModel && t.models.Add(1) > maxModels {
		t.models.Add(-1)
		return t.usage(otherModel)
	}
	kv := []attribute.KeyValue{keyOperation.String("invoke_agent"), keyProvider.String(provider(t.cli)), keyCLI.String(t.cli)}
	if model != "" {
		kv = append(kv, keyModel.String(model))
	}
	u := &usageOpts{
		input:  newMopts(append(kv, keyTokenType.String("input"))...),
		output: newMopts(append(kv, keyTokenType.String("output"))...),
		cost:   newMopts(kv...),
	}
	v, _ := t.usageOpts.LoadOrStore(model, u)
	return v.(*usageOpts)
}

// span is the telemetry of one run, turn or session: its span and what
// its metrics need. A nil *span records nothing; its methods may be
// called on it.
type span struct {
	t     *telemetry
	sp    trace.Span
	rec   bool // sp.IsRecording(): events and attributes are wanted
	cli   string
	mode  string
	model string
	start time.Time

	firstNanos atomic.Int64 // since start, at the first event; 0 before
	stopMu     sync.Mutex   // guards stopAt and stopWhy: the ladder sets them, a turn's sweep reads them
	stopAt     time.Time    // when the run was told to stop; zero if never
	stopWhy    string       // the outcome of that stop
	signal     string       // the signal that ended the CLI, if any
	pid        int
	ended      atomic.Bool
	netLost    atomic.Int64 // refusals the network rules lost (netLost)
}

// begin starts the span of a run (modeInvoke), a turn or a session, as a
// child of the span in ctx, and counts it started.
func (t *telemetry) begin(ctx context.Context, mode, cli string, sreq *invoker.SessionRequest, links ...trace.Link) (context.Context, *span) {
	if t == nil {
		return ctx, nil
	}
	s := &span{t: t, cli: cli, mode: mode, model: sreq.Model, start: time.Now()}
	name := t.runName
	if mode == modeSession {
		name = t.sessionName
	}
	opts := t.startOpts
	if len(links) > 0 && links[0].SpanContext.IsValid() {
		opts = append(opts[:len(opts):len(opts)], trace.WithLinks(links...))
	}
	ctx, s.sp = t.tracer.Start(ctx, name, opts...)
	s.rec = s.sp.IsRecording()
	if s.rec {
		s.sp.SetAttributes(
			keyOperation.String("invoke_agent"),
			keyProvider.String(provider(cli)),
			keyAgent.String(cli),
			keyCLI.String(cli),
			keyMode.String(mode),
			keyPermission.String(sreq.Permission.String()),
		)
		if sreq.Model != "" {
			s.sp.SetAttributes(keyModel.String(sreq.Model))
		}
		if sreq.SessionID != "" {
			s.sp.SetAttributes(keyConversation.String(sreq.SessionID))
		}
	}
	if mode == modeSession {
		t.sessions.Add(ctx, 1, t.cliOpt.add...)
	} else {
		t.started.Add(ctx, 1, t.modeOpt[mode].add...)
		t.active.Add(ctx, 1, t.modeOpt[mode].add...)
	}
	return ctx, s
}

// session starts the span of a session's process (see begin).
func (t *telemetry) session(ctx context.Context, cli string, sreq *invoker.SessionRequest) *span {
	_, s := t.begin(ctx, modeSession, cli, sreq)
	return s
}

// link returns a link to s's span, for the turns of a session.
func (s *span) link() trace.Link {
	if s == nil {
		return trace.Link{}
	}
	return trace.Link{SpanContext: s.sp.SpanContext()}
}

// event adds an event to the span when it records.
func (s *span) event(name string, attrs ...attribute.KeyValue) {
	if s == nil || !s.rec {
		return
	}
	s.sp.AddEvent(name, trace.WithAttributes(attrs...))
}

// started records the start of the CLI's process.
func (s *span) started(pid int, containment string) {
	if s == nil {
		return
	}
	s.pid = pid
	if s.rec {
		s.sp.SetAttributes(keyContainment.String(containment))
		s.event("clinvoke.start", keyPID.Int(pid), keyContainment.String(containment))
	}
}

// observe wraps an OnEvent callback so that the span learns of the first
// event and the tool calls. The callback is called as before; a panic in
// it goes through unchanged.
func (s *span) observe(onEvent func(invoker.Event)) func(invoker.Event) {
	if s == nil {
		return onEvent
	}
	return func(ev invoker.Event) {
		s.saw(&ev)
		if onEvent != nil {
			onEvent(ev)
		}
	}
}

// saw records the first event (warnings do not count, as for the
// first-event timeout) and each tool call.
func (s *span) saw(ev *invoker.Event) {
	if ev.Kind != invoker.KindWarning && s.firstNanos.Load() == 0 {
		d := max(time.Since(s.start), 1)
		s.firstNanos.Store(int64(d))
		s.t.first.Record(context.Background(), d.Seconds(), s.t.modeOpt[s.mode].rec...)
		if s.rec {
			s.event("clinvoke.first_event", attribute.String("clinvoke.event.kind", ev.Kind.String()))
		}
	}
	if ev.Kind == invoker.KindToolCall && ev.Tool != nil && s.rec {
		s.event("clinvoke.tool_call", keyToolName.String(ev.Tool.Name), keyToolCallID.String(ev.Tool.ID))
	}
}

// stopping records the decision to stop the CLI, for why: the start of
// the cancel-to-gone latency. Only the first call counts.
func (s *span) stopping(why error) {
	if s == nil {
		return
	}
	s.stopMu.Lock()
	if !s.stopAt.IsZero() {
		s.stopMu.Unlock()
		return
	}
	s.stopAt, s.stopWhy = time.Now(), outcome(why, false)
	stopWhy := s.stopWhy
	s.stopMu.Unlock()
	if s.rec {
		s.event("clinvoke.stop", keyReason.String(stopWhy))
	}
}

// The events of the ladder's steps.
const (
	stepInterrupt = "clinvoke.interrupt"
	stepTerminate = "clinvoke.terminate"
	stepKill      = "clinvoke.kill"
)

// ladder records a step of the ladder: stepInterrupt, stepTerminate or
// stepKill.
func (s *span) ladder(step string) {
	s.event(step)
}

// ladderSkipped records a step of the ladder whose grace was not waited
// because the CLI's process ignores its signal: the step's event, marked
// clinvoke.signal.ignored.
func (s *span) ladderSkipped(step string) {
	s.event(step, keySignalIgnored.Bool(true))
}

// swept records the sweep after the CLI's exit, and, for a run that was
// stopped, the latency from the stop to the tree gone.
func (s *span) swept(rep proc.Report) {
	if s == nil {
		return
	}
	ctx := context.Background()
	if n := len(rep.Killed); n > 0 {
		s.t.swept.Add(ctx, int64(n), s.t.cliOpt.add...)
	}
	// Counted at 0 too, so that the series exists before the first
	// survivor: an alert on it then has something to watch.
	s.t.survivors.Add(ctx, int64(len(rep.Survivors)), s.t.cliOpt.add...)
	s.stopMu.Lock()
	stopAt, stopWhy := s.stopAt, s.stopWhy
	s.stopMu.Unlock()
	if !stopAt.IsZero() {
		s.t.stop.Record(ctx, time.Since(stopAt).Seconds(), s.t.stopOpt[stopWhy].rec...)
	}
	if s.rec {
		kv := []attribute.KeyValue{keyKilled.Int(len(rep.Killed)), keySurvivors.Int(len(rep.Survivors))}
		s.sp.SetAttributes(kv...)
		s.sp.AddEvent("clinvoke.sweep", trace.WithAttributes(kv...))
	}
}

// exited records how the CLI's process ended.
func (s *span) exited(st proc.State) {
	if s == nil {
		return
	}
	s.signal = st.Signal
}

// end ends the span with the result and error of the run, turn or
// session, and records its metrics. Only the first call counts.
func (s *span) end(res *invoker.Result, err error, panicked bool) {
	if s == nil || !s.ended.CompareAndSwap(false, true) {
		return
	}
	ctx := context.Background()
	out := outcome(err, panicked)
	if s.mode == modeSession && out == outcomeAnswered {
		out = outcomeClosed
	}
	d := time.Since(s.start)
	if s.mode == modeSession {
		s.t.sessions.Add(ctx, -1, s.t.cliOpt.add...)
	} else {
		ended := s.t.endOpt[s.mode][out]
		s.t.active.Add(ctx, -1, s.t.modeOpt[s.mode].add...)
		s.t.ended.Add(ctx, 1, ended.add...)
		s.t.duration.Record(ctx, d.Seconds(), ended.rec...)
		if res != nil {
			s.usage(ctx, &res.Usage)
		}
	}
	if res != nil {
		s.resources(ctx, res, err)
	}
	if s.rec {
		s.sp.SetAttributes(keyOutcome.String(out))
		if out == outcomeClosed {
			out = outcomeAnswered // not an error
		}
		if res != nil {
			if res.Containment != "" {
				s.sp.SetAttributes(keyContainment.String(res.Containment))
			}
			if res.SessionID != "" {
				s.sp.SetAttributes(keyConversation.String(res.SessionID))
			}
			if s.pid != 0 || res.ExitCode >= 0 {
				s.sp.SetAttributes(keyExitCode.Int(res.ExitCode))
			}
			if u := res.Usage; u.InputTokens != 0 || u.OutputTokens != 0 {
				s.sp.SetAttributes(keyInputTokens.Int64(u.InputTokens), keyOutputTokens.Int64(u.OutputTokens))
			}
			if res.Usage.CostUSD != 0 {
				s.sp.SetAttributes(keyCost.Float64(res.Usage.CostUSD))
			}
			if res.Turns != 0 {
				s.sp.SetAttributes(keyTurns.Int(res.Turns))
			}
			if res.OutputCut {
				s.sp.SetAttributes(keyOutputCut.Bool(true))
			}
		}
		if s.signal != "" {
			s.sp.SetAttributes(keySignal.String(s.signal))
		}
		if out != outcomeAnswered {
			s.sp.SetAttributes(keyErrorType.String(out))
			msg := out
			if err != nil {
				msg = err.Error()
			}
			s.sp.SetStatus(codes.Error, msg)
		}
	}
	s.sp.End()
}

// usage records the tokens and the cost of a run or turn.
func (s *span) usage(ctx context.Context, u *invoker.Usage) {
	if u.InputTokens == 0 && u.OutputTokens == 0 && u.CostUSD == 0 {
		return
	}
	opts := s.t.usage(s.model)
	if u.InputTokens > 0 {
		s.t.tokens.Record(ctx, u.InputTokens, opts.input.rec...)
	}
	if u.OutputTokens > 0 {
		s.t.tokens.Record(ctx, u.OutputTokens, opts.output.rec...)
	}
	if u.CostUSD > 0 {
		s.t.cost.Add(ctx, u.CostUSD, opts.cost.add...)
	}
}

// environ returns the TRACEPARENT and TRACESTATE variables that carry the
// span's context to the CLI, in W3C Trace Context form (the variables a
// CLI configured for OpenTelemetry reads to join the trace), or nil when
// there is no valid span context.
func (s *span) environ() []string {
	if s == nil || !s.sp.SpanContext().IsValid() {
		return nil
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpan(context.Background(), s.sp), c)
	env := make([]string, 0, 2)
	for _, k := range []string{"traceparent", "tracestate"} {
		if v := c[k]; v != "" {
			env = append(env, strings.ToUpper(k)+"="+v)
		}
	}
	return env
}

// logger returns l with the span's trace and span ids, so that the
// engine's log records can be found from the trace and back.
func (s *span) logger(l *slog.Logger) *slog.Logger {
	if s == nil {
		return l
	}
	sc := s.sp.SpanContext()
	if !sc.IsValid() {
		return l
	}
	return l.With("trace_id", sc.TraceID().String(), "span_id", sc.SpanID().String())
}

// turnInterrupted records, on the turn's span (the span in the turn's
// context, which Turn made), that the turn was asked to end in the CLI's
// protocol, and why.
func (t *telemetry) turnInterrupted(ctx context.Context, why error) {
	if t == nil {
		return
	}
	if sp := trace.SpanFromContext(ctx); sp.IsRecording() {
		sp.AddEvent(stepInterrupt, trace.WithAttributes(keyReason.String(outcome(why, false)), attribute.String("clinvoke.interrupt.via", "protocol")))
	}
}
