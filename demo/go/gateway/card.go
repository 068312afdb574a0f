package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

const cardPath = "/.well-known/agent-card.json"

// cardHandler forwards the worker's card at the HTTP level (validators and 304 included), its
// interface URLs pointed at the gateway.
type cardHandler struct {
	client     *http.Client
	upstream   string
	public     string
	grpcTarget string // the gateway's gRPC server, added as a v1.0 GRPC interface; "" for none
}

func (h *cardHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, h.upstream+cardPath, nil)
	if err != nil {
		http.Error(w, `{"error":"bad upstream"}`, http.StatusBadGateway)
		return
	}
	for _, name := range []string{"If-None-Match", "A2A-Version", "Accept"} {
		if v := r.Header.Get(name); v != "" {
			req.Header.Set(name, v)
		}
	}
	resp, err := h.client.Do(req)
	if err != nil {
		logf("card: upstream unreachable (%v)", err)
		writeJSON(w, http.StatusBadGateway, []byte(`{"error":"upstream unavailable"}`))
		return
	}
	defer resp.Body.Close() //nolint:errcheck // read to the end below
	for _, name := range []string{"ETag", "Cache-Control", "Vary", "Last-Modified"} {
		if v := resp.Header.Get(name); v != "" {
			w.Header().Set(name, v)
		}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		writeJSON(w, http.StatusBadGateway, []byte(`{"error":"upstream broke"}`))
		return
	}
	if resp.StatusCode != http.StatusOK {
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(body)
		return
	}
	writeJSON(w, http.StatusOK, rewriteCard(body, h.upstream, h.public, h.grpcTarget))
}

// rewriteCard points the card's interface URLs (v1.0 and v0.3 fields) at the gateway and,
// with a gRPC target, adds the gateway's gRPC interface to a v1.0 card's supportedInterfaces
// (the worker's ETag still goes with the card: the gateway adds a way in, not a change of
// agent); a body that is not a JSON object passes unchanged.
func rewriteCard(body []byte, upstream, public, grpcTarget string) []byte {
	var card map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // numbers as written
	if err := dec.Decode(&card); err != nil {
		return body
	}
	fix := func(holder map[string]any) {
		if u, ok := holder["url"].(string); ok && strings.HasPrefix(u, upstream) {
			holder["url"] = public + u[len(upstream):]
		}
	}
	for _, key := range []string{"supportedInterfaces", "additionalInterfaces"} {
		list, _ := card[key].([]any)
		for _, iface := range list {
			if m, ok := iface.(map[string]any); ok {
				fix(m)
			}
		}
	}
	fix(card)
	if list, ok := card["supportedInterfaces"].([]any); ok && grpcTarget != "" {
		card["supportedInterfaces"] = append(list, map[string]any{
			"url": grpcTarget, "protocolBinding": "GRPC", "protocolVersion": "1.0",
		})
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(card); err != nil {
		return body
	}
	return bytes.TrimRight(out.Bytes(), "\n")
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
