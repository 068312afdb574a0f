package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	grpcv0 "github.com/a2aproject/a2a-go/v2/a2agrpc/v0"
	grpcv1 "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"google.golang.org/grpc"
)

// grpcServer is a2a-go's gRPC server transport (package a2agrpc) on a loopback port of its
// own: the v1.0 service lf.a2a.v1.A2AService and, with v03, a2a-go's v0.3 compatibility
// service a2a.v1.A2AService, both over the same RequestHandler. Cards declare it as a GRPC
// interface whose URL is the bare "127.0.0.1:<port>" target, as gRPC clients dial it.
type grpcServer struct {
	listener net.Listener
	server   *grpc.Server
}

// listenGRPC binds a free loopback port (before the card, which names it, is built).
func listenGRPC() (*grpcServer, error) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("gRPC: %w", err)
	}
	return &grpcServer{listener: listener, server: grpc.NewServer()}, nil
}

func (g *grpcServer) target() string { return g.listener.Addr().String() }

// serve registers the services and starts serving in the background.
func (g *grpcServer) serve(handler a2asrv.RequestHandler, v03 bool) {
	grpcv1.NewHandler(handler).RegisterWith(g.server)
	if v03 {
		grpcv0.NewHandler(handler).RegisterWith(g.server)
	}
	go func() {
		if err := g.server.Serve(g.listener); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			logf("gRPC: server stopped: %v", err)
		}
	}()
}

// stop gives open calls until ctx ends (one second, as the HTTP side), then cuts them.
func (g *grpcServer) stop(ctx context.Context) {
	done := make(chan struct{})
	go func() { g.server.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		g.server.Stop()
	}
}

// shutdownGRPC stops g (when there is one) within one second.
func shutdownGRPC(g *grpcServer) {
	if g == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	g.stop(ctx)
}
