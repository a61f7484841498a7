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
