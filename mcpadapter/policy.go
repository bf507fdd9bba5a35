package mcpadapter

import (
	"context"
	"strings"
	"time"

	"github.com/clinvoke/clinvoke/invoker"
)

// request checks in against the configuration and returns the Request to
// run. Its errors are refusals (they match errRefused).
func (t *tool) request(in Input) (invoker.Request, error) {
	if strings.TrimSpace(in.Prompt) == "" {
		return invoker.Request{}, refusef("prompt is empty")
	}
	perm := invoker.Permission(in.Permission)
	if perm == "" {
		perm = t.cfg.defaultPerm
	}
	if !perm.Valid() {
		return invoker.Request{}, refusef("unknown permission %q (want one of %v)", perm, t.cfg.allowedPermissions())
	}
	if perm.Rank() > t.cfg.maxPerm.Rank() {
		return invoker.Request{}, refusef("permission %q is above this server's limit %q", perm, t.cfg.maxPerm)
	}
	if err := checkSessionID(in.SessionID); err != nil {
		return invoker.Request{}, err
	}
	if in.Fork && !t.f.fork {
		return invoker.Request{}, refusef("%s cannot fork a session", t.name)
	}
	if in.Fork && in.SessionID == "" {
		return invoker.Request{}, refusef("fork needs the session_id of the conversation to copy")
	}
	wd, err := t.cfg.checkWorkdir(in.Workdir)
	if err != nil {
		return invoker.Request{}, err
	}
	if len(in.Images) > 0 && !t.f.images {
		return invoker.Request{}, refusef("%s takes no image files", t.name)
	}
	if in.SystemPrompt != "" && !t.f.systemPrompt {
		return invoker.Request{}, refusef("%s takes no system prompt", t.name)
	}
	var images []string
	for _, p := range in.Images {
		img, err := t.cfg.checkImage(wd, p)
		if err != nil {
			return invoker.Request{}, err
		}
		images = append(images, img)
	}
	lim, err := t.limits(in)
	if err != nil {
		return invoker.Request{}, err
	}
	return invoker.Request{
		Prompt:       in.Prompt,
		Workdir:      wd,
		Permission:   perm,
		Model:        in.Model,
		SessionID:    in.SessionID,
		Fork:         in.Fork,
		Deltas:       t.cfg.deltas && t.inv.Capabilities().Deltas,
		SystemPrompt: in.SystemPrompt,
		Images:       images,
		OutputSchema: lim.schema,
		MaxTurns:     lim.turns,
		MaxBudgetUSD: lim.budget,
		MCPServers:   t.cfg.runServers(),
	}, nil
}

// requestOf returns the Request in asks for, unchecked: what a refused
// call's transcript entry records.
func requestOf(in Input) invoker.Request {
	return invoker.Request{Prompt: in.Prompt, Workdir: in.Workdir, Permission: invoker.Permission(in.Permission),
		Model: in.Model, SessionID: in.SessionID, Fork: in.Fork, SystemPrompt: in.SystemPrompt, Images: in.Images,
		OutputSchema: in.OutputSchema, MaxTurns: in.MaxTurns, MaxBudgetUSD: in.MaxBudgetUSD}
}

// refuse answers a call refused before anything started and records it.
func (t *tool) refuse(ctx context.Context, toolName string, index *int, in Input, err error) Output {
	req := requestOf(in)
	out := Output{Status: StatusRefused, ExitCode: -1, Error: reasonOf(err)}
	t.record(ctx, toolName, index, "", &req, nil, out, time.Now())
	return out
}
