// Command a2a-go-gateway is the demo's gateway on the official Go SDK (a2a-go v2): it forwards
// A2A between the orchestrator and the worker.
//
//	a2a-go-gateway --upstream http://127.0.0.1:W [--port N] [--respell [--respell-style S]]
//	               [--grpc [--grpc-upstream JSONRPC|HTTP+JSON]]
//	a2a-go-gateway --serve [--port N] [--slow-timeout S] [--grpc]   (a test peer: see peer.go)
//
// It prints "READY <base_url>" on stdout once it accepts connections (--port 0 picks a free
// port). What it forwards:
//
//   - GET /.well-known/agent-card.json: the worker's card, its interface URLs rewritten to the
//     gateway's own; ETag, Cache-Control, Vary and Last-Modified pass through, and so do
//     conditional requests (If-None-Match) and their 304. This is plain HTTP: a2a-go's card
//     handler serves a card of its own without validators, and the card's ETag is what the
//     detector's etag_changed rests on.
//   - /a2a/jsonrpc and /a2a/rest: served by a2a-go's JSON-RPC and HTTP+JSON transports over a
//     RequestHandler that makes the same call on the worker through a2a-go's client transport
//     of the same binding. Streams are passed on event by event, each flushed as it arrives;
//     when the worker's side breaks, the client's stream ends with the error.
//   - anything else under /a2a/: as is, at the HTTP level.
//   - with --grpc: a2a-go's gRPC server transport (v1.0) on a port of its own, printed on a
//     "GRPC <host:port>" line before READY and added to the card as a GRPC interface; each
//     call is made on the worker through a2a-go's client transport of --grpc-upstream
//     (JSON-RPC by default): a binding translation, as a gateway in front of an HTTP-only
//     agent does.
//
// --respell re-spells task states on the way back (TASK_STATE_WORKING becomes Working with the
// default --respell-style pascal), playing a worker that spells states its own way; states are
// recognised in any case or style. Not on gRPC: TaskState is a protobuf enum there, and
// a2a-go turns any spelling it does not know into TASK_STATE_UNSPECIFIED, so a re-spelled
// state cannot be carried; the gRPC side passes states on as the worker wrote them.
//
// Its calls on the worker are made by a2a-go clients with otel-a2a's Go interceptor
// (go/otela2a): OpenTelemetry's A2A client spans, exported by OTLP when the environment names
// an endpoint (OTEL_EXPORTER_OTLP_ENDPOINT, ...: telemetry.go), under the service name
// a2a-go-gateway unless OTEL_SERVICE_NAME says otherwise. Nothing else of the gateway is
// instrumented.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/otel-a2a/otel-a2a/go/otela2a"
)

func main() {
	log.SetFlags(0)
	log.SetOutput(os.Stderr)
	upstream := flag.String("upstream", "", "the worker's base URL (required)")
	port := flag.Int("port", 0, "listening port on 127.0.0.1 (0: a free one)")
	respell := flag.Bool("respell", false, `fault switch: re-spell task states ("TASK_STATE_WORKING" -> "Working")`)
	style := flag.String("respell-style", "pascal", "with --respell: pascal (Working), lower (working), kebab (input-required) or upper (WORKING)")
	serve := flag.Bool("serve", false, "serve a test A2A peer on a2a-go instead of forwarding")
	slow := flag.Float64("slow-timeout", 30, "with --serve: seconds a slow task waits (at most 30)")
	withGRPC := flag.Bool("grpc", false, "serve A2A over gRPC too, on a port of its own")
	grpcUpstream := flag.String("grpc-upstream", "JSONRPC", "with --grpc: the binding gRPC calls take to the worker (JSONRPC or HTTP+JSON)")
	flag.Parse()
	if *serve {
		seconds := min(max(*slow, 0.1), 30)
		if err := servePeer(*port, time.Duration(seconds*float64(time.Second)), *withGRPC); err != nil {
			log.Fatal("a2a-go-gateway: ", err)
		}
		return
	}
	if *upstream == "" {
		log.Fatal("a2a-go-gateway: --upstream is required")
	}
	var sp speller
	if *respell {
		var err error
		if sp, err = newSpeller(*style); err != nil {
			log.Fatal("a2a-go-gateway: ", err)
		}
	}
	binding := ""
	if *withGRPC {
		binding = *grpcUpstream
		if binding != "JSONRPC" && binding != "HTTP+JSON" {
			log.Fatalf("a2a-go-gateway: unknown --grpc-upstream %q (JSONRPC, HTTP+JSON)", binding)
		}
	}
	flush := setupTracing()
	err := run(strings.TrimRight(*upstream, "/"), *port, sp, binding)
	flush()
	if err != nil {
		log.Fatal("a2a-go-gateway: ", err)
	}
}

// run forwards to upstream; grpcUpstream, when set, is the binding of the gRPC side's calls.
func run(upstream string, port int, sp speller, grpcUpstream string) error {
	base, err := url.Parse(upstream)
	if err != nil || base.Host == "" {
		return fmt.Errorf("bad --upstream %q", upstream)
	}
	// No overall timeout: a stream lives as long as the job; connecting is bounded.
	transport := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		DisableCompression:  true,
		MaxIdleConnsPerHost: 16,
	}
	client := &http.Client{Transport: transport}
	sdkClient := &http.Client{Transport: errorBodyFix{next: transport}}
	listener, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return err // "listen tcp 127.0.0.1:N: bind: address already in use"
	}
	public := "http://" + listener.Addr().String()
	jsonrpcUp := func() (*a2aclient.Client, error) {
		return upstreamClient(upstream+"/a2a/jsonrpc", a2a.TransportProtocolJSONRPC, sdkClient)
	}
	restUp := func() (*a2aclient.Client, error) {
		return upstreamClient(base.JoinPath("/a2a/rest").String(), a2a.TransportProtocolHTTPJSON, sdkClient)
	}
	var g *grpcServer
	cards := &cardHandler{client: client, upstream: upstream, public: public}
	if grpcUpstream != "" {
		if g, err = listenGRPC(); err != nil {
			return err
		}
		cards.grpcTarget = g.target()
		up := jsonrpcUp
		if grpcUpstream == "HTTP+JSON" {
			up = restUp
		}
		if sp != nil {
			logf("gRPC: --respell does not apply (TaskState is an enum on gRPC: states pass as the worker wrote them)")
		}
		grpcClient, err := up()
		if err != nil {
			return err
		}
		g.serve(&forwarder{name: "gRPC->" + grpcUpstream, upstream: grpcClient}, false)
	}

	mux := http.NewServeMux()
	mux.Handle("GET "+cardPath, cards)
	jsonrpcClient, err := jsonrpcUp()
	if err != nil {
		return err
	}
	jsonrpc := &forwarder{name: "JSON-RPC", upstream: jsonrpcClient, respell: sp}
	mux.Handle("/a2a/jsonrpc", a2asrv.NewJSONRPCHandler(jsonrpc))
	restClient, err := restUp()
	if err != nil {
		return err
	}
	rest := &forwarder{name: "HTTP+JSON", upstream: restClient, respell: sp}
	mux.Handle("/a2a/rest/", http.StripPrefix("/a2a/rest", a2asrv.NewRESTHandler(rest)))
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(base) // the worker's host, in the URL and the Host header
		},
		Transport:     transport,
		FlushInterval: -1, // any stream: chunk by chunk
	}
	mux.Handle("/a2a/", proxy)

	return serveUntilSignal(listener, mux, g)
}

// upstreamClient is an a2a-go client of the worker's interface at url, its calls recorded by
// otela2a's interceptor (the spans go wherever telemetry.go sends them, nowhere by default).
func upstreamClient(url string, binding a2a.TransportProtocol, client *http.Client) (*a2aclient.Client, error) {
	return a2aclient.NewFromEndpoints(context.Background(),
		[]*a2a.AgentInterface{a2a.NewAgentInterface(url, binding)},
		a2aclient.WithJSONRPCTransport(client), a2aclient.WithRESTTransport(client),
		a2aclient.WithCallInterceptors(otela2a.NewInterceptor(otela2a.WithBinding(binding))),
	)
}

// serveUntilSignal serves on listener, prints READY once it accepts connections, and shuts
// down on SIGTERM or SIGINT.
// With a gRPC server (already serving), its target comes first, on a "GRPC <host:port>" line.
func serveUntilSignal(listener net.Listener, handler http.Handler, g *grpcServer) error {
	defer shutdownGRPC(g)
	public := "http://" + listener.Addr().String()
	server := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.Default()}
	done := make(chan error, 1)
	go func() { done <- server.Serve(listener) }()
	if g != nil {
		fmt.Printf("GRPC %s\n", g.target())
	}
	fmt.Printf("READY %s\n", public) // the listener accepts from here on
	os.Stdout.Sync()                 //nolint:errcheck // a pipe or a file: nothing to do

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case err := <-done:
		return err
	case <-stop:
	}
	// open streams get one second, as with the Python gateway's uvicorn
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := server.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
