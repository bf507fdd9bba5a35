package mcpadapter

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Input while a task runs (MCP 2025-11-25): a question of the run's
// approval policy (ApprovalsElicit) moves the task to input_required, with
// the question as its statusMessage. The client, polling, sees it and calls
// tasks/result; the question goes to it as an elicitation on that request's
// stream, related to the task. Once answered, the task is working again.
// Unanswered, the question ends with the turn, as for a plain call.

// A resultWaiter is a tasks/result blocked on a task: the context and the
// session of its request, where the task's questions go.
type resultWaiter struct {
	ctx context.Context
	ss  *mcp.ServerSession
}

// elicit asks the task's client params, on the stream of a tasks/result,
// waiting for one until ctx is done.
func (lt *liveTask) elicit(ctx context.Context, params *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	if lt.ext {
		return lt.askByUpdate(ctx, params)
	}
	lt.setStatus(TaskInputRequired, params.Message)
	defer lt.setStatus(TaskWorking, "the client answered: working")
	for {
		lt.mu.Lock()
		var w *resultWaiter
		if len(lt.waiters) > 0 {
			w = lt.waiters[len(lt.waiters)-1]
		}
		arrived := lt.arrived
		lt.mu.Unlock()
		if w != nil && w.ctx.Err() == nil {
			qctx, cancel := context.WithCancelCause(w.ctx)
			stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
			p := *params
			p.Meta = mcp.Meta{relatedTaskKey: map[string]any{"taskId": lt.rec.ID}}
			res, err := w.ss.Elicit(qctx, &p)
			stop()
			cancel(nil)
			if err != nil && w.ctx.Err() != nil && ctx.Err() == nil {
				continue // that tasks/result ended: ask on the next one
			}
			return res, err
		}
		select {
		case <-arrived:
		case <-ctx.Done():
			return nil, fmt.Errorf("no tasks/result came to take the question: %w", context.Cause(ctx))
		}
	}
}

// setStatus changes a running task's status, unless it ended or was
// cancelled, and saves its record.
func (lt *liveTask) setStatus(status, msg string) {
	lt.mu.Lock()
	if lt.rec.Terminal() {
		lt.mu.Unlock()
		return
	}
	lt.rec.Status, lt.rec.StatusMessage, lt.rec.Updated = status, msg, time.Now()
	lt.message = msg
	lt.mu.Unlock()
	if snap, err := lt.save(context.Background()); err != nil {
		lt.e.sh.cfg.log.Error("the record of a task could not be saved", "task", snap.ID, "error", err)
	}
}

// wait registers a tasks/result of ss blocked on the task until the
// returned function is called.
func (lt *liveTask) wait(ctx context.Context, ss *mcp.ServerSession) func() {
	w := &resultWaiter{ctx: ctx, ss: ss}
	lt.mu.Lock()
	lt.waiting++
	lt.waiters = append(lt.waiters, w)
	close(lt.arrived)
	lt.arrived = make(chan struct{})
	lt.mu.Unlock()
	return func() {
		lt.mu.Lock()
		defer lt.mu.Unlock()
		lt.waiting--
		lt.asked = time.Now()
		for i, x := range lt.waiters {
			if x == w {
				lt.waiters = append(lt.waiters[:i], lt.waiters[i+1:]...)
				break
			}
		}
	}
}
