import CWSPipeShims
import Glibc
import WebSocketCore
import WebSocketEngine
import WebSocketExec
import WebSocketTransport

/// Runs wspipe as a server (-l) and returns how it ended (errors already printed).
///
/// Listens before anything else (an address in use fails at once, exit 3), prints the one
/// `listening on` line (even with -q: scripts read the port from it), serves the mode until
/// SIGINT/SIGTERM/SIGHUP, then stops accepting, closes every client with 1001 within the
/// close timeout, and returns 0; the process then dies of the signal (`dieOfSignalIfStopped`).
@inline(never)
public func runServer(_ config: BridgeConfiguration, _ serve: ServeConfiguration) -> ExitStatus {
    let log = Diagnostics(verbosity: config.verbosity)
    guard let loop = startListeningRun(log) else { return log.report(.local(call: "epoll_create1", errno: errno)) }
    let mode = serve.mode.served(ModeContext(config: config, serve: serve, loop: loop, log: log))
    if let failure = mode.checkBeforeListening() { return log.report(failure) }
    let listener: Listener
    switch makeListener(serve, log: log) {
    case .success(let made): listener = made
    case .failure(let failure): return log.report(failure)
    }
    if let root = serve.server.site.root, isFileSystemRoot(root) {
        log.warning("--static '\(Diagnostics.terminalSafe(root))' is the root directory: whoever reaches this listener can read "
                    + "every file this process may read (dotfiles aside)")
    }
    if serve.server.clientAddress.proxyProtocol && serve.server.clientAddress.trusted.isEmpty && !serve.listen.isLoopback {
        log.warning("--proxy-protocol without --trust-proxy on \(serve.listen): any client that reaches it can claim any address "
                    + "(give the proxies' range with --trust-proxy)")
    }
    var configuration = serve.server
    // --oneshot: one client, whose ending gives the exit status.
    if serve.oneshot { configuration.oneClientAtATime = true }
    mode.configure(&configuration)
    let server = ServerDriver(loop: loop, configuration: configuration, mode: mode.engineMode)
    let events = ServerEventLog(log: log, jsonLines: config.stdio.jsonLines, mode: mode)
    server.onEvent = { [unowned server] event in events.show(event, server: server) }
    return mode.run(server, on: listener)
}

/// Whether `path` is the file system's root directory ("/", "/etc/..", a link to it):
/// the same device and inode as "/".
func isFileSystemRoot(_ path: String) -> Bool {
    var given = stat(), root = stat()
    guard stat(path, &given) == 0, stat("/", &root) == 0 else { return false }
    return given.st_dev == root.st_dev && given.st_ino == root.st_ino
}

/// What a run that listens starts with: SIGPIPE ignored, the descriptor limit raised, its
/// loop (nil when epoll or its eventfd cannot be made: errno says why).
func startListeningRun(_ log: Diagnostics) -> EventLoop? {
    wsp_ignore_sigpipe()
    raiseDescriptorLimit(log)
    return try? EventLoop()
}

/// Raises RLIMIT_NOFILE's soft limit to the hard one (each client, or each forwarded pair's
/// two sockets, needs its descriptors); `-v` says so.
func raiseDescriptorLimit(_ log: Diagnostics) {
    if let raised = DescriptorLimit.raiseToHard() {
        log.event("descriptor limit (RLIMIT_NOFILE) raised from \(raised.before) to \(raised.after)")
    }
}

/// The certificate and key, then the listening socket: a mistake in either is no service
/// (loaded before listening, so nothing listens with a bad key).
private func makeListener(_ serve: ServeConfiguration, log: Diagnostics) -> Result<Listener, Failure> {
    var tls: TLSServerContext?
    if let options = serve.tls {
        do throws(TLSFailure) {
            tls = try TLSServerContext(options)
        } catch {
            return .failure(.serverTLS(error))
        }
        log.event("TLS: \(options)")
    }
    let scheme = tls == nil ? "ws" : "wss"
    do throws(ListenError) {
        switch serve.listen {
        case .tcp(let address, let port):
            let listener = try TCPListener(address: address, port: port, reusePort: serve.reusePort)
            var sockets: [any ListeningSocket] = [listener]
            if serve.alsoIPv6Loopback {
                // localhost's other address, on the port the first got; a host without ::1
                // (EADDRNOTAVAIL, EAFNOSUPPORT) serves 127.0.0.1 alone.
                do throws(ListenError) {
                    sockets.append(try TCPListener(address: "::1", port: listener.port, reusePort: serve.reusePort))
                } catch {
                    guard case .system(_, _, let code) = error, code == EADDRNOTAVAIL || code == EAFNOSUPPORT else { throw error }
                    log.warning("localhost: this host has no [::1]; listening on 127.0.0.1 only")
                }
            }
            return .success(Listener(sockets: sockets, tls: tls, urls: sockets.map { "\(scheme)://\($0.localAddress)/" }))
        case .unix(let path):
            return .success(Listener(sockets: [try UnixListener(path: path)], tls: tls, urls: ["\(scheme)+unix://\(path)"]))
        case .descriptor(let fd):
            return inherited([fd], as: "fd:\(fd)", scheme: scheme, tls: tls)
        case .systemd:
            // sd_listen_fds(3): read once, then gone, so that no child takes them for its own.
            for name in SystemdActivation.variables { unsetenv(name) }
            return inherited(serve.activatedDescriptors, as: "systemd", scheme: scheme, tls: tls)
        }
    } catch {
        return .failure(listenFailure(error, serve.listen))
    }
}

/// Listening sockets this process was given (-l fd:N, -l systemd), each checked; the first
/// that is not one is a usage error naming it.
private func inherited(_ descriptors: [Int32], as given: String, scheme: String, tls: TLSServerContext?) -> Result<Listener, Failure> {
    var sockets: [any ListeningSocket] = []
    var urls: [String] = []
    for fd in descriptors {
        do throws(InheritedSocketError) {
            let socket = try InheritedListener(fd: fd)
            sockets.append(socket)
            urls.append(socket.isUnix ? "\(scheme)+unix://\(socket.localAddress)" : "\(scheme)://\(socket.localAddress)/")
        } catch {
            return .failure(.usage("-l \(given): \(error)", pointsAtHelp: false))
        }
    }
    return .success(Listener(sockets: sockets, tls: tls, urls: urls))
}

/// The server's events as -v lines and --jsonl objects (through the mode, in order with
/// its messages); a client's leaving also goes to the mode (--oneshot's status).
struct ServerEventLog {
    let log: Diagnostics
    let jsonLines: Bool
    let mode: ServedMode

    func show(_ event: ServerEvent, server: ServerDriver) {
        let shown: ClientEvent
        var tlsNote = ""
        switch event {
        case .connected(let connection):
            let info = connection.info
            shown = ClientEvent(client: info.id, kind: .connected(remote: info.remoteAddress, path: info.request?.path ?? "",
                                                                      subprotocol: info.subprotocol))
            if let summary = info.tlsSummary {
                tlsNote = " over \(summary)" + (info.clientCertificateSubject.map { ", client certificate \($0)" } ?? "")
            }
        case .disconnected(let connection, let ending):
            shown = ClientEvent(client: connection.info.id, kind: .disconnected(ending))
            mode.clientLeft(ending, server: server)
        case .refused(let status, let remote, let reason, let origin):
            // -v only: an internet-facing server would otherwise log every bot's attempt.
            log.event(refusalText(status: status, remote: remote, reason: reason, origin: origin))
            return
        case .notHTTP(let remote, let byte):
            log.event("connection from \(remote) closed: \(notHTTPText(byte))")
            return
        case .tlsFailed(let remote, let why):
            log.event("TLS handshake with \(remote) failed: \(tlsFailureText(why))")
            return
        case .proxyHeaderRefused(let remote, let why):
            log.event("connection from \(remote) closed: \(Diagnostics.terminalSafe(why))")
            return
        case .compressionUnavailable(let reason):
            log.warning("permessage-deflate declined: \(reason)")
            return
        case .notServed(let target, let why):
            log.event("\(why.status) for \(Diagnostics.terminalSafe(Diagnostics.redactedTarget(target))): \(why)")
            return
        }
        log.event(shown.line + tlsNote)
        if case .connected(let connection) = event, let deflate = connection.info.deflate {
            let summary = deflate.configuration.map { " (\($0.summary))" } ?? ""
            log.event("client \(connection.info.id): permessage-deflate agreed: \(deflate.response)\(summary)")
        }
        if jsonLines { mode.writeEvent(shown.json) }
    }
}

/// A refused handshake for -v: who, the status and why, as the refusal's body said it to a
/// client that may not show it (a browser's script cannot read it), with the request's
/// Origin when the reason does not name it already. A 2xx is a plain request answered
/// (--health, --metrics).
func refusalText(status: Int, remote: String, reason: String?, origin: String?) -> String {
    guard status >= 400 else { return "answered a plain request from \(remote) with \(status)" }
    var text = "refused a handshake from \(remote) with \(status) \(HTTPResponse.reasonPhrase(status))"
    if let reason { text += ": " + Diagnostics.terminalSafe(reason) }
    if let origin, !(reason ?? "").contains(origin) { text += " (Origin: \(Diagnostics.terminalSafe(String(origin.prefix(200)))))" }
    return text
}

/// Why one client's TLS handshake failed, from OpenSSL's reason ("peer did not return a
/// certificate", "http request", "unsupported protocol").
func tlsFailureText(_ why: StreamFailure) -> String {
    switch why {
    case .closed, .tlsSessionClosed: return "the client closed the connection"
    case .tls(let alert): return alert.detail
    default: return why.description
    }
}

/// Why a client that does not speak HTTP was closed at its first byte.
func notHTTPText(_ byte: UInt8) -> String {
    let said = HTTPRequestError.notHTTP(firstByte: byte).description
    return byte == HTTPRequestError.tlsHandshakeRecord ? said + " (a TLS handshake: wss:// to this ws:// listener)" : said
}

/// A listener that could not be made, as the failure `report` words.
func listenFailure(_ error: ListenError, _ address: ListenAddress) -> Failure {
    switch error {
    case .invalidAddress: return .usage("cannot listen on '\(address)': \(error)", pointsAtHelp: false)
    case .system(_, let shown, let code):
        return code == EADDRINUSE ? .addressInUse(address: shown) : .cannotListen(address: shown, errno: code)
    }
}
