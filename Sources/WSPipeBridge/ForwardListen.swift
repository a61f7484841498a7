import CWSPipeShims
import Glibc
import Synchronization
import WebSocketCore
import WebSocketEngine
import WebSocketTransport

/// --forward-listen: listens for TCP and gives each accepted connection its own client
/// WebSocket to the URL, with the client options, relaying its bytes as binary messages
/// both ways. Prints `listening on tcp://ADDR:PORT` (even with -q), runs until
/// SIGINT/SIGTERM/SIGHUP, then closes every WebSocket with 1001 within the close timeout
/// and exits 0, as the server modes do.
@inline(never)
public func runForwardListen(_ config: BridgeConfiguration, on address: ListenAddress) -> ExitStatus {
    let log = Diagnostics(verbosity: config.verbosity)
    guard let loop = startListeningRun(log) else { return log.report(.local(call: "epoll_create1", errno: errno)) }
    guard case .tcp(let host, let port) = address else { return log.report(.usage("--forward-listen takes a TCP [ADDR:]PORT", pointsAtHelp: true)) }
    let socket: TCPListener
    do throws(ListenError) {
        socket = try TCPListener(address: host, port: port)
    } catch {
        return log.report(listenFailure(error, address))
    }
    if !address.isLoopback {
        log.warning("--forward-listen on \(address), which is not a loopback address: whoever reaches it gets a WebSocket "
                    + "to \(Diagnostics.redactedLocation(config.client.url.description)) with this command's credentials")
    }
    let forwarding: ForwardListening
    do throws(EventLoopError) {
        forwarding = try ForwardListening(config: config, loop: loop, socket: socket, log: log)
    } catch {
        return log.report(.local(call: "eventfd", errno: errno))
    }
    return forwarding.run(announcing: "wspipe: listening on tcp://\(socket.localAddress), forwarding to "
                          + Diagnostics.redactedLocation(config.client.url.description))
}

extension TCPStream {
    /// Closes with a reset (SO_LINGER 0): the local program sees ECONNRESET, a failure, not
    /// the end of an empty stream.
    func reset() {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(fileDescriptor, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        close()
    }
}

/// A connection's opening log for -v: each line names the connection, since openings run
/// at the same time on their own threads (each line is still one write).
struct TaggedOpeningLog: OpeningLog {
    let log: Diagnostics
    let tag: String
    /// Set on a try after the first (a connection waiting for a descriptor tries every
    /// 100 ms): the dial's events, which the first try showed, are left out until the
    /// handshake's first line, and shown from then on.
    private let hushed: Hush?

    init(log: Diagnostics, tag: String, retry: Bool = false) {
        self.log = log
        self.tag = tag
        hushed = retry ? Hush() : nil
    }

    private final class Hush: Sendable {
        let lifted = Atomic(false)
    }

    var settingNames: SettingNames { log.settingNames }
    func line(_ direction: String, _ text: String) {
        hushed?.lifted.store(true, ordering: .relaxed)
        log.line(direction, "[\(tag)] \(text)")
    }
    func header(_ direction: String, _ header: HTTPHeader) {
        guard log.isVerbose else { return }
        log.line(direction, "[\(tag)] \(header.name): \(Diagnostics.redacted(header))")
    }
    func event(_ message: @autoclosure () -> String) {
        if let hushed, !hushed.lifted.load(ordering: .relaxed) { return }
        log.event("[\(tag)] \(message())")
    }
    func shownTarget(_ target: String) -> String { log.shownTarget(target) }
    func redirecting(status: Int, to url: WebSocketURL, sameHost: Bool) {
        event(Diagnostics.redirectText(status: status, to: url, sameHost: sameHost))
    }
}
