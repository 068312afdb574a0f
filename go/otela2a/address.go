package otela2a

import (
	"net"
	"net/url"
	"strconv"
	"strings"
)

// serverAddress is the host and port of the selected interface URL (the convention's
// server.address and server.port): an HTTP URL's, with the scheme's default port when it
// names none, or a gRPC target's ("host:port", "dns:///host:port"). port is 0 when unknown.
func serverAddress(baseURL string) (host string, port int) {
	if scheme, _, ok := strings.Cut(baseURL, "://"); ok && scheme != "dns" {
		u, err := url.Parse(baseURL)
		if err != nil || u.Hostname() == "" {
			return "", 0
		}
		host = u.Hostname()
		if p, err := strconv.Atoi(u.Port()); err == nil {
			return host, p
		}
		switch strings.ToLower(u.Scheme) {
		case "http":
			return host, 80
		case "https":
			return host, 443
		}
		return host, 0
	}
	target := strings.TrimPrefix(baseURL, "dns:")
	target = strings.TrimLeft(target, "/")
	if i := strings.IndexByte(target, '/'); i >= 0 { // dns://resolver/host:port
		target = target[i+1:]
	}
	h, p, err := net.SplitHostPort(target)
	if err != nil {
		return target, 0
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		return h, 0
	}
	return h, n
}
