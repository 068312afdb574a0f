package otela2a

import (
	"context"
	"errors"
	"iter"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	grpcv1 "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"google.golang.org/grpc"
)

// peer is a real a2a-go server on loopback (a2asrv's JSON-RPC, HTTP+JSON and gRPC transports
// over one request handler) whose agent behaves by the first word of the message text:
//
//	echo ...  submitted, working, an artifact, completed
//	input     submitted, working, input-required (a follow-up or a cancel goes on)
//	fail      submitted, working, failed
//	odd       submitted, then "input-required": a state spelled the v0.3 way
type peer struct {
	card *a2a.AgentCard
	base string // http://127.0.0.1:port

	mu          sync.Mutex
	traceparent string // of the last A2A request
}

func (p *peer) interfaceURL(binding a2a.TransportProtocol) string {
	for _, iface := range p.card.SupportedInterfaces {
		if iface.ProtocolBinding == binding {
			return iface.URL
		}
	}
	return ""
}

func (p *peer) lastTraceparent() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.traceparent
}

type behaviour struct{}

func text(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	var parts []string
	for _, part := range m.Parts {
		if t, ok := part.Content.(a2a.Text); ok {
			parts = append(parts, string(t))
		}
	}
	return strings.Join(parts, " ")
}

func (behaviour) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		info := ec.TaskInfo()
		status := func(state a2a.TaskState) bool {
			return yield(a2a.NewStatusUpdateEvent(info, state, nil), nil)
		}
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(info, ec.Message), nil) {
			return
		}
		word, _, _ := strings.Cut(text(ec.Message), " ")
		if word == "odd" {
			status(a2a.TaskState("input-required"))
			return
		}
		if !status(a2a.TaskStateWorking) {
			return
		}
		switch word {
		case "input":
			status(a2a.TaskStateInputRequired)
		case "fail":
			status(a2a.TaskStateFailed)
		default:
			if yield(a2a.NewArtifactEvent(info, a2a.NewTextPart("echo")), nil) {
				status(a2a.TaskStateCompleted)
			}
		}
	}
}

func (behaviour) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec.TaskInfo(), a2a.TaskStateCanceled, nil), nil)
	}
}

// startPeer serves the peer until the test ends.
func startPeer(t *testing.T) *peer {
	t.Helper()
	grpcListener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &peer{}
	handler := a2asrv.NewHandler(behaviour{})
	mux := http.NewServeMux()
	mux.Handle("/a2a/jsonrpc", a2asrv.NewJSONRPCHandler(handler))
	mux.Handle("/a2a/rest/", http.StripPrefix("/a2a/rest", a2asrv.NewRESTHandler(handler)))
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.traceparent = r.Header.Get("traceparent")
		p.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(server.Close)
	g := grpc.NewServer()
	grpcv1.NewHandler(handler).RegisterWith(g)
	go func() {
		if err := g.Serve(grpcListener); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("gRPC server: %v", err)
		}
	}()
	t.Cleanup(g.Stop)

	p.base = server.URL
	p.card = &a2a.AgentCard{
		Name:        "otela2a test peer",
		Description: "a2a-go v2 server that behaves by the first word",
		Version:     "1.2.3",
		SupportedInterfaces: []*a2a.AgentInterface{
			a2a.NewAgentInterface(server.URL+"/a2a/jsonrpc", a2a.TransportProtocolJSONRPC),
			a2a.NewAgentInterface(server.URL+"/a2a/rest", a2a.TransportProtocolHTTPJSON),
			a2a.NewAgentInterface(grpcListener.Addr().String(), a2a.TransportProtocolGRPC),
		},
		Capabilities:       a2a.AgentCapabilities{Streaming: true},
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"text/plain"},
	}
	return p
}
