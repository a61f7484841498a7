import WebSocketCore
import WebSocketEngine
import WebSocketTransport

/// Opens the session's connection with the engine's `ClientOpener` (dial, handshake,
/// `--location` redirects) before one `--connect-timeout` deadline.
struct Opener {
    let config: BridgeConfiguration
    let log: Diagnostics

    typealias Opened = ClientOpener.Opened

    /// The dial options of the configuration, with the settings kept outside `network`.
    private var dialOptions: DialOptions {
        var options = config.client.network
        options.verifyPeer = !config.client.insecure
        options.caFile = config.client.caFile
        options.userAgent = config.client.userAgent
        return options
    }

    /// - Parameter notAfter: an earlier limit than `--connect-timeout` (`--timeout`).
    func open(into buffer: ByteBuffer, notAfter limit: Instant? = nil) throws(OpenError) -> Opened {
        try open(into: buffer, deadline: Deadline(seconds: config.client.connectTimeout).notAfter(limit), log: log)
    }

    /// - Parameter deadline: `--connect-timeout`'s, with a cancellation (--forward-listen's
    ///   openings end at once at a signal).
    func open(into buffer: ByteBuffer, deadline: Deadline, log: any OpeningLog) throws(OpenError) -> Opened {
        var opener = clientOpener
        opener.log = log
        return try opener.open(into: buffer, deadline: deadline)
    }

    private var clientOpener: ClientOpener {
        let config = self.config
        var opener = ClientOpener(url: config.client.url, dialOptions: dialOptions, subprotocols: config.subprotocols,
                                  headers: { config.client.requestHeaders(credentials: $0, userHost: $1) })
        opener.followRedirects = config.client.followRedirects
        opener.maxRedirects = config.client.maxRedirects
        opener.extensions = config.client.offeredExtensions
        return opener
    }
}

extension Opener {
    /// The TLS options an https:// proxy's own TLS takes (verification and the lowest
    /// version); the client certificate and --sni are the server's alone.
    static let proxyTLSOptions = ["--insecure", "--cacert", "--tls-min"]

    /// The TLS options given that no hop of the route uses: all of them for a ws:// URL
    /// reached directly, through a plain proxy or a Unix socket; with an https:// proxy
    /// (`viaTLSProxy`), those only the server's TLS takes. None with -L (a redirect may lead
    /// to wss://), nor when the route is unknown (a proxy variable that is no URL: opening
    /// says so).
    var unusedTLSOptions: (names: [String], viaTLSProxy: Bool) {
        let given = config.client.tlsOptionsGiven
        guard !given.isEmpty, !config.client.url.isSecure, !config.client.followRedirects,
              let route = try? Dialer.route(for: config.client.url, options: dialOptions, names: commandLineNames) else { return ([], false) }
        if case .proxy(let proxy, _, _, _) = route, proxy.kind == .https {
            return (given.filter { !Opener.proxyTLSOptions.contains($0) }, true)
        }
        return (given, false)
    }

    /// The warning for `unusedTLSOptions` (hidden by -q), once at the start of a run.
    func warnAboutUnusedTLSOptions() {
        let (unused, viaTLSProxy) = unusedTLSOptions
        guard let last = unused.last else { return }
        let names = unused.count == 1 ? last : unused.dropLast().joined(separator: ", ") + " and " + last
        let url = Diagnostics.redactedURL(config.client.url.description)
        let why = viaTLSProxy
            ? "on the route to \(url) only the https:// proxy uses TLS, and \(unused.count == 1 ? "it is" : "they are") for the server's"
            : "no hop of the route to \(url) uses TLS"
        log.warning("\(names) \(unused.count == 1 ? "is" : "are") ignored: \(why) (write wss:// for TLS to the server)")
    }
}

extension Diagnostics: OpeningLog {
    public var settingNames: SettingNames { commandLineNames }

    public func shownTarget(_ target: String) -> String { Diagnostics.redactedTarget(target) }

    public func redirecting(status: Int, to url: WebSocketURL, sameHost: Bool) {
        event(Diagnostics.redirectText(status: status, to: url, sameHost: sameHost))
    }

    static func redirectText(status: Int, to url: WebSocketURL, sameHost: Bool) -> String {
        "redirect \(status) to \(Diagnostics.redactedTarget(url.description))"
            + (sameHost ? "" : " (another host: credentials, -H Host, --connect-to and --sni are not used there)")
    }
}
