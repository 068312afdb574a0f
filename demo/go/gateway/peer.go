package main

import (
	"context"
	"fmt"
	"iter"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
)

// The --serve mode: a real A2A peer on a2a-go for otel-a2a's tests (tests/support/peers.py),
// with the behaviour of tests/peers/python_peer.py, chosen by the first word of the text:
//
//	echo ... (and anything not below)  submitted, working, artifact, completed
//	slow ...    submitted, working, then waits (<= --slow-timeout s) for a cancel; on timeout
//	            the task fails. a2a-go runs one execution per task at a time, so a follow-up
//	            message to a slow task while it waits is refused by the SDK (unlike the Python
//	            and Node peers, which hand it to the waiting task)
//	input ...   submitted, working, input-required (a follow-up continues the task)
//	fail        submitted, working, failed
//	reject      submitted, rejected
//
// It serves, on 127.0.0.1: the card (a2a-go's static card handler: no ETag, no
// Cache-Control, no 304), v1.0 JSON-RPC at /a2a/jsonrpc, v1.0 HTTP+JSON at /a2a/rest, and
// a2a-go's v0.3 compatibility transports at /a2a/v0.3/jsonrpc and /a2a/v0.3/rest (/v1/...).
// With --grpc, a2a-go's gRPC server transport too (a2agrpc: v1.0 lf.a2a.v1.A2AService and the
// v0.3 a2a.v1.A2AService) on a port of its own, printed on a "GRPC <host:port>" line before
// READY and declared in the card as two GRPC interfaces, with an extended card.

const (
	heartbeatURI     = "urn:otel-a2a:heartbeat:v1"
	heartbeatSeconds = 30
)

// waiters are the slow tasks waiting for a cancel.
type waiters struct {
	mu    sync.Mutex
	chans map[a2a.TaskID]chan struct{}
}

func (w *waiters) register(id a2a.TaskID) chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := make(chan struct{})
	w.chans[id] = ch
	return ch
}

func (w *waiters) release(id a2a.TaskID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.chans[id]; ok {
		close(ch)
		delete(w.chans, id)
	}
}

type behaviour struct {
	waiting     *waiters
	slowTimeout time.Duration
}

var _ a2asrv.AgentExecutor = (*behaviour)(nil)

func agentText(info a2a.TaskInfoProvider, text string) *a2a.Message {
	return a2a.NewMessageForTask(a2a.MessageRoleAgent, info, a2a.NewTextPart(text))
}

func userText(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	var parts []string
	for _, p := range m.Parts {
		if t, ok := p.Content.(a2a.Text); ok {
			parts = append(parts, string(t))
		}
	}
	return strings.TrimSpace(strings.Join(parts, " "))
}

func (b *behaviour) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		info := ec.TaskInfo()
		status := func(state a2a.TaskState, text string) bool {
			var msg *a2a.Message
			if text != "" {
				msg = agentText(info, text)
			}
			return yield(a2a.NewStatusUpdateEvent(info, state, msg), nil)
		}
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(info, ec.Message), nil) {
			return
		}
		text := userText(ec.Message)
		word, rest, _ := strings.Cut(text, " ")
		switch strings.ToLower(word) {
		case "reject":
			status(a2a.TaskStateRejected, "rejected: "+text)
			return
		}
		if !status(a2a.TaskStateWorking, "") {
			return
		}
		switch strings.ToLower(word) {
		case "fail":
			status(a2a.TaskStateFailed, "failed as asked")
		case "input":
			status(a2a.TaskStateInputRequired, "more input needed")
		case "slow":
			released := b.waiting.register(ec.TaskID)
			select {
			case <-released: // canceled: Cancel emits the canceled state
			case <-ctx.Done():
			case <-time.After(b.slowTimeout):
				b.waiting.release(ec.TaskID)
				status(a2a.TaskStateFailed, "slow task timed out")
			}
		default:
			reply := text
			if strings.EqualFold(word, "echo") && rest != "" {
				reply = rest
			}
			art := a2a.NewArtifactEvent(info, a2a.NewTextPart("echo: "+reply))
			art.Artifact.Name = "echo"
			if yield(art, nil) {
				status(a2a.TaskStateCompleted, "")
			}
		}
	}
}

func (b *behaviour) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		b.waiting.release(ec.TaskID)
		yield(a2a.NewStatusUpdateEvent(ec.TaskInfo(), a2a.TaskStateCanceled, nil), nil)
	}
}

// peerCard is the test peer's card; with a gRPC target it declares a2a-go's gRPC server
// (v1.0 and v0.3) and an extended card (served over every binding, fetched over gRPC by
// the tests), as the Python peer's --grpc mode does.
func peerCard(base, grpcTarget string) *a2a.AgentCard {
	iface := func(path string, binding a2a.TransportProtocol, version a2a.ProtocolVersion) *a2a.AgentInterface {
		i := a2a.NewAgentInterface(base+path, binding)
		i.ProtocolVersion = version
		return i
	}
	interfaces := []*a2a.AgentInterface{
		iface("/a2a/jsonrpc", a2a.TransportProtocolJSONRPC, "1.0"),
		iface("/a2a/rest", a2a.TransportProtocolHTTPJSON, "1.0"),
		iface("/a2a/v0.3/jsonrpc", a2a.TransportProtocolJSONRPC, "0.3"),
		iface("/a2a/v0.3/rest", a2a.TransportProtocolHTTPJSON, "0.3"),
	}
	if grpcTarget != "" {
		for _, version := range []a2a.ProtocolVersion{"1.0", "0.3"} {
			i := a2a.NewAgentInterface(grpcTarget, a2a.TransportProtocolGRPC)
			i.ProtocolVersion = version
			interfaces = append(interfaces, i)
		}
	}
	return &a2a.AgentCard{
		Name:                "otel-a2a Go test peer",
		Description:         "a2a-go v2 peer whose behaviour follows the message text",
		Version:             "1.0.0",
		SupportedInterfaces: interfaces,
		Capabilities: a2a.AgentCapabilities{
			Streaming:         true,
			ExtendedAgentCard: grpcTarget != "",
			Extensions: []a2a.AgentExtension{{
				URI:         heartbeatURI,
				Description: "Task liveness: an authoritative observation is fresh for this long",
				Params:      map[string]any{"intervalSeconds": heartbeatSeconds},
			}},
		},
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a.AgentSkill{{
			ID:          "behave",
			Name:        "Behave",
			Description: "echo / slow / input / fail / reject, chosen by the first word",
			Tags:        []string{"test"},
		}},
	}
}

// servePeer runs the test peer until SIGTERM/SIGINT (withGRPC: a2a-go's gRPC server too).
func servePeer(port int, slowTimeout time.Duration, withGRPC bool) error {
	listener, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return err
	}
	base := "http://" + listener.Addr().String()
	var g *grpcServer
	target := ""
	if withGRPC {
		if g, err = listenGRPC(); err != nil {
			return err
		}
		target = g.target()
	}
	card := peerCard(base, target)
	options := []a2asrv.RequestHandlerOption{
		a2asrv.WithCapabilityChecks(&card.Capabilities),
		// a2a-go's in-memory store lists only the tasks of a named caller (ListTasks answers
		// -31401 Unauthenticated to an anonymous one); the test peer has no authentication:
		// every caller is one user
		a2asrv.WithTaskStore(taskstore.NewInMemory(&taskstore.InMemoryStoreConfig{
			Authenticator: func(context.Context) (string, error) { return "test", nil },
		})),
	}
	if withGRPC {
		extended := *card
		extended.Version = "1.0.0-extended"
		options = append(options, a2asrv.WithExtendedAgentCard(&extended))
	}
	handler := a2asrv.NewHandler(
		&behaviour{waiting: &waiters{chans: map[a2a.TaskID]chan struct{}{}}, slowTimeout: slowTimeout},
		options...,
	)
	if g != nil {
		g.serve(handler, true)
	}
	mux := http.NewServeMux()
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	mux.Handle("/a2a/jsonrpc", a2asrv.NewJSONRPCHandler(handler))
	mux.Handle("/a2a/rest/", http.StripPrefix("/a2a/rest", a2asrv.NewRESTHandler(handler)))
	mux.Handle("/a2a/v0.3/jsonrpc", a2av0.NewJSONRPCHandler(handler))
	// a2a-go's v0.3 HTTP+JSON routes have no /v1 prefix (/message:send); v0.3 clients (the
	// Python SDK's, the spec's examples) append /v1/... to the interface URL
	mux.Handle("/a2a/v0.3/rest/v1/", http.StripPrefix("/a2a/v0.3/rest/v1", a2av0.NewRESTHandler(handler)))
	return serveUntilSignal(listener, mux, g)
}
