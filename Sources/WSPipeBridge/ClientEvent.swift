import WebSocketCore
import WebSocketEngine

/// A client coming or going, as the faces show it: a `-v` line on stderr, or a `--jsonl`
/// object on stdout. One schema for the server's clients and (later) the client's
/// reconnections: {"type":"connected",...} and {"type":"disconnected",...}.
struct ClientEvent {
    /// The "type" values of event objects; stdin skips objects with these, so output
    /// replays as input.
    static let types: Set<String> = ["connected", "disconnected"]

    enum Kind {
        case connected(remote: String, path: String, subprotocol: String?)
        case disconnected(ConnectionEnding)
    }

    let client: Int
    let kind: Kind

    /// How a connection ended, in one word: the closing handshake completed, we failed it
    /// (protocol error), it was lost without a Close, or a timeout (ping, close) gave up.
    static func cause(_ ending: ConnectionEnding) -> String {
        switch ending {
        case .closed: return "closed"
        case .failed: return "failed"
        case .lost(.pingTimeout): return "ping_timeout"
        case .lost: return "lost"
        case .timedOut: return "timed_out"
        }
    }

    /// The Close that decided it: the peer's (closed), ours (failed), none otherwise.
    static func close(_ ending: ConnectionEnding) -> ClosePayload? {
        switch ending {
        case .closed(let handshake): return handshake.received
        case .failed(let error): return ClosePayload(code: error.closeCode)
        case .lost, .timedOut: return nil
        }
    }

    /// The -v line (without "wspipe: * ").
    var line: String {
        switch kind {
        case .connected(let remote, let path, let subprotocol):
            return "client \(client) connected from \(remote) to \(path)" + (subprotocol.map { " (subprotocol \($0))" } ?? "")
        case .disconnected(let ending):
            var close = ""
            if let payload = ClientEvent.close(ending), let code = payload.code {
                close = " with \(code)" + (payload.reason.isEmpty ? "" : ": \(payload.reasonText)")
            }
            let detail = describe(ending, peer: "the client").map { ": \($0)" } ?? ""
            return "client \(client) disconnected (\(ClientEvent.cause(ending)))\(close)\(detail)"
        }
    }

    /// The JSON object, one line with its newline.
    var json: [UInt8] {
        var out = Array("{\"type\":".utf8)
        func string(_ text: String) {
            var copy = text
            copy.withUTF8 { JSONWriter.appendString(UnsafeRawBufferPointer($0), to: &out) }
        }
        switch kind {
        case .connected(let remote, let path, let subprotocol):
            out += Array("\"connected\",\"client\":\(client),\"remote\":".utf8)
            string(remote)
            out += Array(",\"path\":".utf8)
            string(path)
            out += Array(",\"subprotocol\":".utf8)
            if let subprotocol { string(subprotocol) } else { out += Array("null".utf8) }
        case .disconnected(let ending):
            out += Array("\"disconnected\",\"client\":\(client),\"code\":".utf8)
            let close = ClientEvent.close(ending)
            out += Array((close?.code.map { String($0.rawValue) } ?? "null").utf8)
            out += Array(",\"reason\":".utf8)
            if let close, close.code != nil { string(close.reasonText) } else { out += Array("null".utf8) }
            out += Array(",\"cause\":".utf8)
            string(ClientEvent.cause(ending))
        }
        out += Array("}\n".utf8)
        return out
    }
}
