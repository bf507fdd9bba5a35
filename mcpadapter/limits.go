package mcpadapter

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/clinvoke/clinvoke/invoker"
)

// Structured answers and limits: the output_schema, max_turns and
// max_budget_usd inputs, offered where the invoker declares the capability
// (featuresOf), the server's ceilings (Options.MaxTurns,
// Options.MaxBudgetUSD), and the structured answer in the output.

// limitProperties adds the inputs of the structured answer and the limits
// that f supports to props, with the server's ceilings as maxima.
func limitProperties(c *config, f features, props map[string]*jsonschema.Schema) {
	if f.outputSchema {
		props["output_schema"] = &jsonschema.Schema{Type: "object",
			Description: "A JSON Schema (an object, usually with \"type\": \"object\") that the agent's final answer must satisfy (optional). " +
				"The answer is then returned as JSON in structured_output; an answer that does not satisfy it fails the call, keeping the text."}
	}
	if f.maxTurns {
		s := &jsonschema.Schema{Type: "integer", Minimum: jsonschema.Ptr(1.0),
			Description: "The most agent turns (model responses and tool rounds) the run may take (optional); reaching it fails the call, keeping the session_id to resume."}
		if c.maxTurns > 0 {
			s.Maximum = jsonschema.Ptr(float64(c.maxTurns))
			s.Description += " At most " + strconv.Itoa(c.maxTurns) + " on this server, which is also the limit when none is given."
		}
		props["max_turns"] = s
	}
	if f.maxBudget {
		s := &jsonschema.Schema{Type: "number", ExclusiveMinimum: jsonschema.Ptr(0.0),
			Description: "The most the run may spend, in US dollars (optional); reaching it fails the call, keeping the session_id to resume. " +
				"It is checked after each model response, so the last response may go over it."}
		if c.maxBudget > 0 {
			s.Maximum = jsonschema.Ptr(c.maxBudget)
			s.Description += " At most " + formatUSD(c.maxBudget) + " on this server, which is also the budget when none is given."
		}
		props["max_budget_usd"] = s
	}
}

func formatUSD(v float64) string { return "$" + strconv.FormatFloat(v, 'f', -1, 64) }

// limits is what a call asks for in structured answer and limits, checked.
type limits struct {
	schema json.RawMessage
	turns  int
	budget float64
}

// limits checks the structured-answer and limit inputs of in against what
// the CLI supports and the server's ceilings, and applies the ceilings to a
// call that gives no limit. Its errors wrap errRefused. The schema itself
// is checked by the invoker, before it starts anything.
func (t *tool) limits(in Input) (limits, error) {
	l := limits{schema: in.OutputSchema, turns: in.MaxTurns, budget: in.MaxBudgetUSD}
	if string(l.schema) == "null" {
		l.schema = nil
	}
	if len(l.schema) > 0 && !t.f.outputSchema {
		return limits{}, refusef("%s takes no output_schema", t.name)
	}
	switch {
	case l.turns != 0 && !t.f.maxTurns:
		return limits{}, refusef("%s takes no max_turns", t.name)
	case l.turns < 0:
		return limits{}, refusef("max_turns %d: give a positive number of turns", l.turns)
	case t.cfg.maxTurns > 0 && l.turns > t.cfg.maxTurns:
		return limits{}, refusef("max_turns %d is above this server's limit %d", l.turns, t.cfg.maxTurns)
	case l.turns == 0 && t.f.maxTurns:
		l.turns = t.cfg.maxTurns // 0 when the server sets none
	}
	switch b := l.budget; {
	case b != 0 && !t.f.maxBudget:
		return limits{}, refusef("%s takes no max_budget_usd", t.name)
	case b < 0 || math.IsNaN(b) || math.IsInf(b, 0):
		return limits{}, refusef("max_budget_usd %v: give a positive amount in US dollars", b)
	case t.cfg.maxBudget > 0 && b > t.cfg.maxBudget:
		return limits{}, refusef("max_budget_usd %s is above this server's limit %s", formatUSD(b), formatUSD(t.cfg.maxBudget))
	case b == 0 && t.f.maxBudget:
		l.budget = t.cfg.maxBudget
	}
	return l, nil
}

// setStructured copies the structured answer and the turn count of res to
// out.
func setStructured(out *Output, res *invoker.Result) {
	if res.Structured != nil {
		out.Structured = res.Structured
	}
	out.Turns = res.Turns
}
