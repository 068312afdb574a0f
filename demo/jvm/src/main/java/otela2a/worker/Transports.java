package otela2a.worker;

import io.a2a.server.TransportMetadata;
import io.a2a.spec.TransportProtocol;

/**
 * The transports this server mounts ({@link Http}), announced through the SDK's ServiceLoader
 * contract so that its card validator accepts the card's interfaces, as the reference servers'
 * TransportMetadata classes do.
 */
final class Transports {
    private Transports() {}

    /** JSON-RPC at /a2a/jsonrpc. */
    public static final class JsonRpc implements TransportMetadata {
        @Override
        public String getTransportProtocol() {
            return TransportProtocol.JSONRPC.asString();
        }
    }

    /** HTTP+JSON at /a2a/rest. */
    public static final class Rest implements TransportMetadata {
        @Override
        public String getTransportProtocol() {
            return TransportProtocol.HTTP_JSON.asString();
        }
    }
}
