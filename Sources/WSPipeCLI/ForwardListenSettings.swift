import WebSocketTransport
import WSPipeBridge

extension Option {
    static let forwardListen = Option("--forward-listen", value: "[ADDR:]PORT",
                                      in: .gateway, applies: .forwardListen,
                                      help: "listen for TCP on PORT (127.0.0.1 unless ADDR; port 0: any free); each",
                                      "connection gets its own WebSocket to URL (the client options apply), its",
                                      "bytes as binary messages both ways; runs until a signal") { text, name throws(UsageError) in
        if let port = portWithoutAddress(text) {
            throw UsageError("\(name) ':\(port)' names no address: \(name) \(port) listens on loopback (127.0.0.1), "
                             + "\(name) 0.0.0.0:\(port) on every interface")
        }
        let address: ListenAddress
        do throws(ListenAddress.ParseError) {
            address = try ListenAddress(parsing: text)
        } catch {
            throw UsageError("\(name) \(error)")
        }
        guard case .tcp = address else { throw UsageError("\(name) takes a TCP [ADDR:]PORT ('\(text)' is not one)") }
        return { $0.forwardListen = address }
    }

    /// What --forward-listen has no use for: stdin, stdout and the session's counts (each
    /// connection's bytes are the messages), and staying connected (a connection whose
    /// WebSocket fails is closed; its program connects again if it wants to).
    static let notForwarding: [Option] = applying(to: .client, not: [.forwardListen, .reconnect])
    static let reconnecting: [Option] = applying(to: .reconnect)
}

extension Settings {
    static let forwardListenWithServer = UsageError("--forward-listen cannot be combined with -l/--listen: it listens for TCP "
                                                    + "and is a client of URL (a WebSocket server that forwards to TCP is -l with --forward)")

    /// --forward-listen takes the client options; refuses those of stdin and stdout, and
    /// --reconnect, each with why.
    func checkForwardListen() throws(UsageError) {
        guard forwardListen != nil else { return }
        if listen != nil { throw Settings.forwardListenWithServer }
        if let option = Option.allCases.first(where: { $0.isServerOnly && given.contains($0.longName) }) {
            throw UsageError("\(option.longName) is a server option; --forward-listen is a client of URL")
        }
        if let option = Option.reconnecting.first(where: { given.contains($0.longName) }) {
            throw UsageError("\(option.longName) does not apply to --forward-listen: each TCP connection opens its WebSocket "
                             + "once, and one that fails or ends closes that connection (its program may connect again)")
        }
        if let option = Option.notForwarding.first(where: { given.contains($0.longName) }) {
            throw UsageError("\(option.longName) has no meaning with --forward-listen: each TCP connection's bytes are "
                             + "the binary messages of its own WebSocket, with no stdin or stdout")
        }
    }
}
