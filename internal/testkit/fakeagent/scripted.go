package fakeagent

import (
	"encoding/json"
	"time"
)

// Agent is invokertest.Agent, field for field, so that each converts to
// the other (fakeagent.Agent(a)); invokertest documents the fields. Its
// Script is the one translation of a scripted agent into the fake: the
// public Agent's Options use it, and so do the tests of this module that
// run the conformance suite.
type Agent struct {
	CLI           string
	SessionID     string
	Answer        string
	Answers       []string
	Chunks        int
	Tool          bool
	Progress      time.Duration
	Silence       time.Duration
	AnswerSize    int
	HugeLine      int
	Stall         time.Duration
	Fail          string
	NoResult      bool
	ExitCode      int
	Stderr        string
	IgnoreSignals bool
	Ask           string
	AskCount      int
	Edit          string
	CallTool      string
	ToolArgs      map[string]any
	LeaveBehind   bool
}

// Script returns the Script of a.
func (a Agent) Script() Script {
	s := Script{
		Flavor:        a.CLI,
		SessionID:     a.SessionID,
		Answer:        a.Answer,
		Answers:       a.Answers,
		Chunks:        a.Chunks,
		AnswerSize:    a.AnswerSize,
		HugeLine:      a.HugeLine,
		Interval:      10 * time.Millisecond,
		Tool:          a.Tool,
		StreamFor:     a.Progress,
		SilentFor:     a.Silence,
		StallFor:      a.Stall,
		Fail:          a.Fail,
		NoTerminal:    a.NoResult,
		ExitCode:      a.ExitCode,
		Stderr:        a.Stderr,
		IgnoreSignals: a.IgnoreSignals,
		Grandchild:    a.LeaveBehind,
		Escapee:       a.LeaveBehind,
		TurnSpawns:    a.LeaveBehind,
		Ask:           a.Ask,
		AskCount:      a.AskCount,
		Edit:          a.Edit,
		CallTool:      a.CallTool,
	}
	if a.ToolArgs != nil {
		b, err := json.Marshal(a.ToolArgs)
		if err != nil {
			panic("invokertest: Agent.ToolArgs: " + err.Error())
		}
		s.ToolArgs = b
	}
	if s.Flavor == "" {
		s.Flavor = Codex
	}
	return s
}
