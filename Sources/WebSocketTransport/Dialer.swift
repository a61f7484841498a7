import WebSocketCore

/// Everything besides the URL that decides how a connection is made.
public struct DialOptions: Sendable {
    /// `--proxy` / `--socks5`, or the environment.
    public var proxy: ProxySetting = .environment
    /// `--noproxy`: replaces `no_proxy`/`NO_PROXY` when set.
    public var noProxy: String?
    /// The proxy variables (see `ProxySelection.variableNames`), captured at start-up.
    public var environment: [String: String] = [:]
    /// `--connect-to`: dial this instead of the URL's host and port. Host header, SNI and
    /// certificate verification keep the URL's host.
    public var connectTo: HostPort?
    /// `--sni`: the TLS server name and the name the certificate must carry.
    public var serverName: String?
    public var connect = ConnectOptions()
    public var verifyPeer = true
    public var caFile: String?
    public var clientCertificate: ClientCertificate?
    public var minimumTLSVersion: TLSVersion = .tls12
    /// Sent with HTTP CONNECT.
    public var userAgent: String?

    public init() {}
}

/// How a connection reaches the server, decided before any I/O (and printed by -v).
public enum Route: Sendable, Equatable, CustomStringConvertible {
    case unix(path: String)
    /// `target` is the URL's host and port, or `--connect-to`'s; `note` says why no proxy.
    case direct(target: HostPort, note: String)
    /// Through `proxy` to `target`; `source` says where the proxy was set (for -v:
    /// "--proxy", "https_proxy", ...; for errors: `hop`).
    case proxy(ProxyURL, target: HostPort, source: String, hop: ProxyHop)

    public var description: String {
        switch self {
        case .unix(let path): return "Unix socket \(path)"
        case .direct(let target, let note): return "direct to \(target) (\(note))"
        case .proxy(let proxy, let target, let source, _): return "via \(proxy.name) (from \(source)) to \(target)"
        }
    }
}

/// Makes a connected `ByteStream` for a URL: Unix socket, TCP (Happy Eyeballs), or a
/// tunnel through an HTTP, HTTPS or SOCKS5 proxy; then TLS for wss://. Everything before
/// `deadline` (`--connect-timeout`).
public enum Dialer {
    /// The route for `url`, its reasons worded with `names`. Throws `.proxyVariable` for a
    /// proxy variable that is not a proxy URL.
    public static func route(for url: WebSocketURL, options: DialOptions, names: SettingNames) throws(TransportError) -> Route {
        if let path = url.unixSocketPath { return .unix(path: path) }
        let target = options.connectTo ?? HostPort(host: url.host, port: url.port)
        let choice: ProxyChoice
        do {
            choice = try ProxySelection.choose(for: url, setting: options.proxy, noProxy: options.noProxy,
                                               environment: { options.environment[$0] }, names: names)
        } catch {
            throw .proxyVariable(error)
        }
        guard let proxy = choice.proxy, let source = choice.source else { return .direct(target: target, note: choice.reason) }
        return .proxy(proxy, target: target, source: choice.reason, hop: ProxyHop(proxy: proxy, source: source))
    }

    /// The TLS settings for `url`: the server name is `--sni`, else the URL's host (also
    /// with `--connect-to`, which only changes where the TCP connection goes).
    public static func tlsOptions(for url: WebSocketURL, options: DialOptions) -> TLSOptions {
        let name = options.serverName ?? url.host
        let isIP = options.serverName == nil ? url.isIPLiteral : IPAddress(name) != nil
        return TLSOptions(serverName: name, serverNameIsIP: isIP, verifyPeer: options.verifyPeer, caFile: options.caFile,
                          clientCertificate: options.clientCertificate, minimumVersion: options.minimumTLSVersion)
    }

    /// Connects to `url` as `options` say, TLS included for wss://, before `deadline`;
    /// `log` gets what it does, with settings named by `names`. Throws a `TransportError`:
    /// what failed, where, and for which host.
    public static func connect(to url: WebSocketURL, options: DialOptions, deadline: Deadline, names: SettingNames,
                               log: @escaping (String) -> Void = { _ in }) throws(TransportError) -> ByteStream {
        let route = try route(for: url, options: options, names: names)
        log("route: \(route)")
        if let connectTo = options.connectTo, url.unixSocketPath == nil {
            log("\(names.connectTo): dialing \(connectTo) instead of \(HostPort(host: url.host, port: url.port)); Host"
                + "\(url.isSecure ? ", SNI and certificate name" : "") stay \(url.host)")
        }
        let stream: ByteStream
        switch route {
        case .unix(let path):
            stream = try UnixConnector.connect(path: path, deadline: deadline, log: log)
        case .direct(let target, _):
            do {
                stream = try TCPConnector.connect(host: target.host, port: target.port, options: options.connect,
                                                  deadline: deadline, log: log)
            } catch {
                // A name that does not resolve is said to be `connectTo`'s, not the URL's.
                guard options.connectTo != nil, case .resolve(let host, let reason, let family, nil, _) = error else { throw error }
                throw .resolve(host: host, reason: reason, family: family, connectTo: true)
            }
        case .proxy(_, let target, _, let hop):
            stream = try tunnel(through: hop, to: target, options: options, deadline: deadline, names: names, log: log)
        }
        guard url.isSecure else { return stream }
        let tls = tlsOptions(for: url, options: options)
        if options.serverName != nil || options.connectTo != nil {
            log("TLS server name (SNI and certificate check): \(tls.serverName)")
        }
        do {
            return try TLSStream.connect(over: stream, options: tls, deadline: deadline, names: names, log: log)
        } catch {
            stream.close()
            throw error
        }
    }

    private static func tunnel(through hop: ProxyHop, to target: HostPort, options: DialOptions, deadline: Deadline,
                               names: SettingNames, log: @escaping (String) -> Void) throws(TransportError) -> ByteStream {
        let proxy = hop.proxy
        let tcp: TCPStream
        do {
            tcp = try TCPConnector.connect(host: proxy.host, port: proxy.port, options: options.connect, deadline: deadline,
                                           log: log)
        } catch {
            // Cannot reach the proxy at all: still "cannot connect" (3), said so.
            switch error {
            case .resolve(let host, let reason, let family, _, _):
                throw .resolve(host: host, reason: reason, family: family, via: hop)
            case .connect(let address, let code, _):
                throw .connect(target: address, errno: code, via: hop)
            case .timedOut(_, let seconds):
                throw .timedOut(.connectingToProxy(hop), seconds: seconds)
            default:
                throw error
            }
        }
        var carrier: ByteStream = tcp
        do throws(TransportError) {
            if proxy.kind == .https {
                let name = proxy.host
                let tls = TLSOptions(serverName: name, serverNameIsIP: IPAddress(name) != nil, verifyPeer: options.verifyPeer,
                                     caFile: options.caFile, clientCertificate: nil, minimumVersion: options.minimumTLSVersion,
                                     plainPeerHint: TLSOptions.plainHTTPProxyHint)
                do throws(TransportError) {
                    carrier = try TLSStream.connect(over: tcp, options: tls, deadline: deadline, names: names,
                                                    log: { log("\(proxy.name): \($0)") })
                } catch {
                    switch error {
                    case .tls(let failure, _): throw .tls(failure, via: proxy)
                    case .timedOut(_, let seconds): throw .timedOut(.tlsHandshake(proxy: proxy), seconds: seconds)
                    default: throw error
                    }
                }
            }
            let context = ProxyTunnel.Context(proxy: proxy, target: target, deadline: deadline, log: log)
            if proxy.kind.isSOCKS {
                try ProxyTunnel.socks5Connect(over: carrier, context, connectOptions: options.connect)
            } else {
                try ProxyTunnel.httpConnect(over: carrier, context, userAgent: options.userAgent)
            }
            return carrier
        } catch {
            carrier.close()
            throw error
        }
    }
}
