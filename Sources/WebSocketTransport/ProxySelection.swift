import WebSocketCore

/// Which proxy the command line asked for.
public enum ProxySetting: Sendable, Equatable {
    /// Whatever the environment says (the default).
    case environment
    /// No proxy, whatever the environment says (`--proxy ''`).
    case none
    /// This proxy (`--proxy URL`, `--socks5 HOST:PORT`).
    case url(ProxyURL)
}

/// The hosts that bypass proxies: `no_proxy` / `NO_PROXY` / `--noproxy`.
///
/// Grammar: entries separated by commas and/or white space, matched case-insensitively
/// against the URL's host (never a resolved address):
/// - `*` alone: every host.
/// - a host name: that host and every host under it; a leading `.` or `*.` is optional
///   (`example.com`, `.example.com` and `*.example.com` all match `example.com` and
///   `ws.example.com`, never `badexample.com`).
/// - an IP address (IPv6 with or without brackets): a URL written with that address.
/// - a CIDR block (`10.0.0.0/8`, `fd00::/8`): a URL written with an address inside it.
/// - any of these with `:PORT` (IPv6 in brackets: `[::1]:8080`): only that port.
/// Empty entries are ignored; an entry that parses as nothing above is a host name.
public struct NoProxyList: Sendable, Equatable {
    enum Entry: Sendable, Equatable {
        case all
        case domain(String, port: UInt16?)
        case address(IPAddress, port: UInt16?)
        case network(IPAddress, prefix: Int)
    }

    let entries: [Entry]

    public init(_ text: String) {
        var entries: [Entry] = []
        for raw in text.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" || $0 == "\n" }) {
            let item = raw.lowercased()
            if item == "*" {
                entries.append(.all)
                continue
            }
            if let slash = item.firstIndex(of: "/") {
                let prefixText = item[item.index(after: slash)...]
                if let address = IPAddress(item[..<slash]), let prefix = Int(prefixText),
                   prefix >= 0, prefix <= address.bytes.count * 8 {
                    entries.append(.network(address, prefix: prefix))
                }
                continue  // a '/' never belongs in a host name
            }
            if let address = IPAddress(item) {
                entries.append(.address(address, port: nil))
                continue
            }
            if let hostPort = HostPort(parsing: item) {
                if let address = IPAddress(hostPort.host) {
                    entries.append(.address(address, port: hostPort.port))
                } else {
                    entries.append(.domain(NoProxyList.normalize(hostPort.host), port: hostPort.port))
                }
                continue
            }
            let name = NoProxyList.normalize(item)
            if !name.isEmpty { entries.append(.domain(name, port: nil)) }
        }
        self.entries = entries
    }

    /// "*.Example.COM." -> "example.com".
    private static func normalize(_ name: String) -> String {
        var text = Substring(name.lowercased())
        if text.hasPrefix("*.") { text = text.dropFirst(2) }
        while text.hasPrefix(".") { text = text.dropFirst() }
        while text.hasSuffix(".") { text = text.dropLast() }
        return String(text)
    }

    public var isEmpty: Bool { entries.isEmpty }

    /// Whether a URL with this host and port goes without a proxy.
    public func matches(host: String, port: UInt16) -> Bool {
        let name = NoProxyList.normalize(host)
        let address = IPAddress(host)
        for entry in entries {
            switch entry {
            case .all:
                return true
            case .domain(let domain, let wantedPort):
                if let wantedPort, wantedPort != port { continue }
                if address == nil && (name == domain || name.hasSuffix("." + domain)) { return true }
            case .address(let entryAddress, let wantedPort):
                if let wantedPort, wantedPort != port { continue }
                if address == entryAddress { return true }
            case .network(let network, let prefix):
                if let address, address.isIn(network: network, prefix: prefix) { return true }
            }
        }
        return false
    }
}

/// The proxy a connection uses, and why (for -v).
public struct ProxyChoice: Sendable, Equatable {
    /// nil: connect directly.
    public var proxy: ProxyURL?
    /// Where the decision came from, in the face's `SettingNames`: "--proxy",
    /// "https_proxy", "no_proxy matches ...".
    public var reason: String
    /// Where `proxy` was set (nil without a proxy), for error messages.
    public var source: ProxySource?

    public init(proxy: ProxyURL?, reason: String, source: ProxySource? = nil) {
        self.proxy = proxy
        self.reason = reason
        self.source = source
    }
}

/// Where a proxy setting came from: the caller's option, or an environment variable.
public enum ProxySource: Equatable, Sendable {
    case option
    case variable(String)
}

/// A proxy variable or option that does not hold a usable proxy URL.
public struct ProxyConfigurationError: Error, Equatable, CustomStringConvertible {
    /// The variable or option ("https_proxy", "--proxy").
    public var source: String
    public var reason: ProxyURLError

    public var description: String { "\(source): \(reason)" }
}

/// Proxy selection from options and environment, the way curl and most tools read it.
///
/// For a `wss://` URL the first non-empty of `wss_proxy`, `WSS_PROXY`, `https_proxy`,
/// `HTTPS_PROXY`, `all_proxy`, `ALL_PROXY`; for `ws://` of `ws_proxy`, `WS_PROXY`,
/// `http_proxy`, `HTTP_PROXY`, `all_proxy`, `ALL_PROXY`. `HTTP_PROXY` is ignored when
/// `REQUEST_METHOD` is set (a CGI environment, where a client's `Proxy:` header can set
/// it: "httpoxy"). `--proxy` replaces the variables. Then the host is checked against
/// `--noproxy`, else `no_proxy`, else `NO_PROXY`: a match means no proxy, whichever way it
/// was set. Unix-socket URLs never use a proxy (the dialer does not ask).
public enum ProxySelection {
    /// Every variable the selection may read, so that a caller can capture them once.
    public static let variableNames = ["wss_proxy", "WSS_PROXY", "ws_proxy", "WS_PROXY", "https_proxy", "HTTPS_PROXY",
                                       "http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY",
                                       "REQUEST_METHOD"]

    /// The variables consulted for a URL, in order of precedence.
    public static func variables(secure: Bool, cgi: Bool) -> [String] {
        if secure { return ["wss_proxy", "WSS_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"] }
        return ["ws_proxy", "WS_PROXY", "http_proxy"] + (cgi ? [] : ["HTTP_PROXY"]) + ["all_proxy", "ALL_PROXY"]
    }

    /// `names` word the choice's `reason` (a variable is named as it is spelled).
    public static func choose(for url: WebSocketURL, setting: ProxySetting, noProxy: String?,
                              environment: (String) -> String?, names: SettingNames) throws(ProxyConfigurationError) -> ProxyChoice {
        func value(_ name: String) -> String? {
            guard let text = environment(name)?.trimmingWhitespace, !text.isEmpty else { return nil }
            return text
        }
        let proxy: ProxyURL
        let source: ProxySource
        switch setting {
        case .none:
            return ProxyChoice(proxy: nil, reason: names.proxyOff)
        case .url(let given):
            proxy = given
            source = .option
        case .environment:
            let cgi = value("REQUEST_METHOD") != nil
            guard let name = variables(secure: url.isSecure, cgi: cgi).first(where: { value($0) != nil }),
                  let text = value(name) else {
                return ProxyChoice(proxy: nil, reason: "no proxy variable set")
            }
            do {
                proxy = try ProxyURL(parsing: text)
            } catch {
                throw ProxyConfigurationError(source: name, reason: error)
            }
            source = .variable(name)
        }
        let bypass: (list: String, name: String)? = noProxy.map { ($0, names.noProxy) }
            ?? value("no_proxy").map { ($0, "no_proxy") } ?? value("NO_PROXY").map { ($0, "NO_PROXY") }
        if let bypass, NoProxyList(bypass.list).matches(host: url.host, port: url.port) {
            return ProxyChoice(proxy: nil, reason: "\(bypass.name) matches \(url.host)")
        }
        let reason: String
        switch source {
        case .option: reason = names.proxy
        case .variable(let name): reason = name
        }
        return ProxyChoice(proxy: proxy, reason: reason, source: source)
    }
}

extension String {
    /// Without leading and trailing SP, HTAB, CR and LF bytes (by byte, see `HTTPText`).
    var trimmingWhitespace: String { HTTPText.trimmed(self, also: [0x0A, 0x0D]) }
}
