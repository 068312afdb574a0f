package main

import (
	"fmt"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// canonicalStates maps a state's letters (case and separators dropped) to its v1.0 spelling,
// so that "TASK_STATE_WORKING", "working", "Working" and "input-required" are all understood:
// the gateway matches states case-insensitively, as the seed's gateway did.
var canonicalStates = func() map[string]a2a.TaskState {
	out := map[string]a2a.TaskState{}
	for _, s := range []a2a.TaskState{
		a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateInputRequired,
		a2a.TaskStateAuthRequired, a2a.TaskStateCompleted, a2a.TaskStateFailed,
		a2a.TaskStateCanceled, a2a.TaskStateRejected,
	} {
		short := strings.TrimPrefix(string(s), "TASK_STATE_")
		out[letters(short)] = s
		out[letters(string(s))] = s
	}
	out["cancelled"] = a2a.TaskStateCanceled
	return out
}()

func letters(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// canonical is the v1.0 spelling of a state written in any case or style, or false.
func canonical(s a2a.TaskState) (a2a.TaskState, bool) {
	c, ok := canonicalStates[letters(string(s))]
	return c, ok
}

// speller re-spells a state in one style; nil leaves states as the worker wrote them.
type speller func(a2a.TaskState) a2a.TaskState

// newSpeller is the --respell-style: pascal ("InputRequired", the seed's worker), lower
// ("input_required"), kebab ("input-required", the v0.3 wire names) or upper ("INPUT_REQUIRED").
func newSpeller(style string) (speller, error) {
	var words func([]string) string
	switch style {
	case "pascal":
		words = func(w []string) string {
			for i, x := range w {
				w[i] = x[:1] + strings.ToLower(x[1:])
			}
			return strings.Join(w, "")
		}
	case "lower":
		words = func(w []string) string { return strings.ToLower(strings.Join(w, "_")) }
	case "kebab":
		words = func(w []string) string { return strings.ToLower(strings.Join(w, "-")) }
	case "upper":
		words = func(w []string) string { return strings.Join(w, "_") }
	default:
		return nil, fmt.Errorf("unknown --respell-style %q (pascal, lower, kebab, upper)", style)
	}
	return func(s a2a.TaskState) a2a.TaskState {
		c, ok := canonical(s)
		if !ok {
			return s // not a state the gateway knows: passed on as is
		}
		short := strings.TrimPrefix(string(c), "TASK_STATE_")
		return a2a.TaskState(words(strings.Split(short, "_")))
	}, nil
}

// task re-spells a task's status in place.
func (sp speller) task(t *a2a.Task) {
	if sp != nil && t != nil {
		t.Status.State = sp(t.Status.State)
	}
}

// event re-spells the state an event carries, in place.
func (sp speller) event(e a2a.Event) {
	if sp == nil {
		return
	}
	switch v := e.(type) {
	case *a2a.Task:
		sp.task(v)
	case *a2a.TaskStatusUpdateEvent:
		v.Status.State = sp(v.Status.State)
	}
}
