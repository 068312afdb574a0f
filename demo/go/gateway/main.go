// Command a2a-go-gateway is the demo's gateway on the official Go SDK (a2a-go v2): it forwards
// A2A between the orchestrator and the worker.
//
//	a2a-go-gateway --upstream http://127.0.0.1:W [--port N] [--respell [--respell-style S]]
//	a2a-go-gateway --serve [--port N] [--slow-timeout S]    (a test peer: see peer.go)
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
//
// --respell re-spells task states on the way back (TASK_STATE_WORKING becomes Working with the
// default --respell-style pascal), playing a worker that spells states its own way; states are
// recognised in any case or style. The gateway is deliberately not instrumented.
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

	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
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
	flag.Parse()
	if *serve {
		seconds := min(max(*slow, 0.1), 30)
		if err := servePeer(*port, time.Duration(seconds*float64(time.Second))); err != nil {
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
	if err := run(strings.TrimRight(*upstream, "/"), *port, sp); err != nil {
		log.Fatal("a2a-go-gateway: ", err)
	}
}

func run(upstream string, port int, sp speller) error {
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

	mux := http.NewServeMux()
	mux.Handle("GET "+cardPath, &cardHandler{client: client, upstream: upstream, public: public})
	jsonrpc := &forwarder{name: "JSON-RPC", upstream: a2aclient.NewJSONRPCTransport(upstream+"/a2a/jsonrpc", sdkClient), respell: sp}
	mux.Handle("/a2a/jsonrpc", a2asrv.NewJSONRPCHandler(jsonrpc))
	restURL := base.JoinPath("/a2a/rest")
	rest := &forwarder{name: "HTTP+JSON", upstream: a2aclient.NewRESTTransport(restURL, sdkClient), respell: sp}
	mux.Handle("/a2a/rest/", http.StripPrefix("/a2a/rest", a2asrv.NewRESTHandler(rest)))
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(base) // the worker's host, in the URL and the Host header
		},
		Transport:     transport,
		FlushInterval: -1, // any stream: chunk by chunk
	}
	mux.Handle("/a2a/", proxy)

	return serveUntilSignal(listener, mux)
}

// serveUntilSignal serves on listener, prints READY once it accepts connections, and shuts
// down on SIGTERM or SIGINT.
func serveUntilSignal(listener net.Listener, handler http.Handler) error {
	public := "http://" + listener.Addr().String()
	server := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.Default()}
	done := make(chan error, 1)
	go func() { done <- server.Serve(listener) }()
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
