import WebSocketCore
import WebSocketTransport

/// What the server knows about one accepted connection besides its request.
public struct ConnectionFacts: Sendable, Equatable {
    /// The client's address without brackets ("127.0.0.1", "::1"); empty on a Unix socket.
    public var remoteAddress: String
    /// The client's port; nil on a Unix socket.
    public var remotePort: Int?
    /// Our address and port the client connected to (for SERVER_NAME/SERVER_PORT when the
    /// Host header has none).
    public var localAddress: String
    public var localPort: Int?
    /// Whether the connection runs over TLS (`HTTPS=on`).
    public var isTLS: Bool
    /// The verified client certificate's subject under mTLS (RFC 2253 form), else nil.
    public var clientCertificateSubject: String?
    /// The subprotocol we selected in the 101, if any.
    public var subprotocol: String?
    /// A per-connection identifier (`UNIQUE_ID`, as websocketd and Apache's mod_unique_id).
    public var uniqueID: String
    /// The server checked the client's bearer token (`--require-bearer`): `AUTH_TYPE` is
    /// `Bearer` and the `Authorization` header, the server's secret, is not passed on (RFC
    /// 3875 §4.1.18 lets a server withhold it; Apache does by default).
    public var bearerChecked = false

    public init(remoteAddress: String, remotePort: Int?, localAddress: String, localPort: Int?, isTLS: Bool = false,
                clientCertificateSubject: String? = nil, subprotocol: String? = nil, uniqueID: String) {
        self.remoteAddress = remoteAddress
        self.remotePort = remotePort
        self.localAddress = localAddress
        self.localPort = localPort
        self.isTLS = isTLS
        self.clientCertificateSubject = clientCertificateSubject
        self.subprotocol = subprotocol
        self.uniqueID = uniqueID
    }
}

extension ConnectionFacts {
    /// "ip:port" or "[v6]:port" → (address without brackets, port); a Unix socket path (or
    /// anything without a port, or bad brackets) → ("", nil): a Unix client has no address.
    public static func split(_ address: String) -> (address: String, port: Int?) {
        if address.hasPrefix("[") {
            guard let split = BracketedHost(address[...]) else { return ("", nil) }
            return (String(split.host), split.port.flatMap { Int($0) })
        }
        guard !address.hasPrefix("/"), let colon = address.lastIndex(of: ":"),
              let port = Int(address[address.index(after: colon)...]) else { return ("", nil) }
        return (String(address[..<colon]), port)
    }
}

/// The child's environment, websocketd's name for name (RFC 3875 CGI variables), as a pure
/// function of the request and the connection's facts.
///
/// Besides websocketd's set: `HTTP_HOST` too (websocketd's Go server drops the Host
/// header from its list), no `HTTP_PROXY` (a client's `Proxy:` header must not become the
/// child's proxy: "httpoxy"), `GATEWAY_INTERFACE=CGI/1.1` (websocketd 0.4 said
/// `websocketd-CGI/0.1`), `WEBSOCKET_PROTOCOL` (the subprotocol selected; no CGI or
/// websocketd name exists for it) and, under mTLS, Apache mod_ssl's `SSL_CLIENT_S_DN`
/// (the verified client certificate's subject) with `SSL_CLIENT_VERIFY=SUCCESS`.
public enum CGIEnvironment {
    /// The CGI variables for one connection, in websocketd's order, headers last (in
    /// request order, a repeated header once, its values joined with ", ").
    ///
    /// Values: CR and LF become spaces and surrounding whitespace is trimmed (as
    /// websocketd); `PATH_INFO` and `PATH_TRANSLATED` are percent-decoded, `REQUEST_URI`
    /// and `QUERY_STRING` are as sent; `REMOTE_HOST` is the address (no reverse lookup).
    ///
    /// `script` (`--dir`): `SCRIPT_NAME` and `PATH_INFO` are the program's part of the path
    /// and the rest (websocketd's), and `SCRIPT_FILENAME` the program's file (as CGI servers
    /// set it: a #! script run through its descriptor sees /proc/self/fd/3 as $0).
    public static func variables(for request: HandshakeRequest, connection: ConnectionFacts,
                                 serverSoftware: String,
                                 script: (name: String, pathInfo: String, file: String)? = nil) -> [(name: String, value: String)] {
        let (serverName, serverPort) = hostAndPort(request.host, isTLS: connection.isTLS,
                                                   fallback: (connection.localAddress, connection.localPort))
        let decodedPath = percentDecoded(request.path)
        var result: [(name: String, value: String)] = [
            ("SERVER_SOFTWARE", serverSoftware),
            ("REMOTE_ADDR", connection.remoteAddress),
            ("REMOTE_HOST", connection.remoteAddress),
            ("SERVER_NAME", serverName),
            ("SERVER_PORT", serverPort),
            ("SERVER_PROTOCOL", request.head.version),
            ("GATEWAY_INTERFACE", "CGI/1.1"),
            ("REQUEST_METHOD", request.head.method),
            ("SCRIPT_NAME", script?.name ?? "/"),
            ("PATH_INFO", script?.pathInfo ?? decodedPath),
            ("PATH_TRANSLATED", decodedPath),
            ("QUERY_STRING", request.query ?? ""),
            ("AUTH_TYPE", connection.bearerChecked ? "Bearer" : ""),
            ("CONTENT_LENGTH", ""),
            ("CONTENT_TYPE", ""),
            ("REMOTE_IDENT", ""),
            ("REMOTE_USER", ""),
            ("UNIQUE_ID", connection.uniqueID),
            ("REMOTE_PORT", connection.remotePort.map(String.init) ?? ""),
            ("REQUEST_URI", request.path + (request.query.map { "?" + $0 } ?? "")),
        ]
        if let script { result.append(("SCRIPT_FILENAME", cleaned(script.file))) }
        if connection.isTLS { result.append(("HTTPS", "on")) }
        if let protocolName = connection.subprotocol { result.append(("WEBSOCKET_PROTOCOL", protocolName)) }
        if let subject = connection.clientCertificateSubject {
            result.append(("SSL_CLIENT_S_DN", cleaned(subject)))
            result.append(("SSL_CLIENT_VERIFY", "SUCCESS"))
        }
        var headerIndex: [String: Int] = [:]
        for header in request.headers {
            let name = "HTTP_" + String(header.name.uppercased().map { $0 == "-" ? "_" : $0 })
            guard name != "HTTP_PROXY", !(connection.bearerChecked && name == "HTTP_AUTHORIZATION") else { continue }
            let value = cleaned(header.value)
            if let index = headerIndex[name] {
                result[index].value += ", " + value
            } else {
                headerIndex[name] = result.count
                result.append((name, value))
            }
        }
        return result
    }

    /// The child's whole environment: `PATH` and each name in `passing` that the parent has
    /// (`parent` looks a name up), then the CGI variables (which win over passed ones).
    public static func childEnvironment(cgi: [(name: String, value: String)], passing names: [String],
                                        parent: (String) -> String?) -> [String] {
        var seen = Set(cgi.map(\.name))
        var entries: [String] = []
        for name in ["PATH"] + names where !seen.contains(name) {
            seen.insert(name)
            if let value = parent(name) { entries.append("\(name)=\(value)") }
        }
        return entries + cgi.map { "\($0.name)=\($0.value)" }
    }

    /// websocketd's value cleaning: CR/LF to spaces, surrounding whitespace trimmed; NUL
    /// (which cannot be in an environment entry) to a space too.
    static func cleaned(_ value: String) -> String {
        let spaced = String(value.unicodeScalars.map { $0 == "\r" || $0 == "\n" || $0 == "\0" ? " " : Character($0) })
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        return String(spaced.drop(while: isSpace).reversed().drop(while: isSpace).reversed())
    }

    /// Host header → (name, port): "[::1]:8080" → ("::1", "8080"); without a port, 80 or 443
    /// (websocketd's rule); an empty Host → our own address.
    static func hostAndPort(_ host: String, isTLS: Bool, fallback: (String, Int?)) -> (String, String) {
        let defaultPort = isTLS ? "443" : "80"
        if host.isEmpty { return (fallback.0, fallback.1.map(String.init) ?? defaultPort) }
        if host.hasPrefix("["), let close = host.firstIndex(of: "]") {
            let name = String(host[host.index(after: host.startIndex)..<close])
            let rest = host[host.index(after: close)...]
            return (name, rest.hasPrefix(":") ? String(rest.dropFirst()) : defaultPort)
        }
        let parts = host.split(separator: ":", omittingEmptySubsequences: false)
        if parts.count == 2 { return (String(parts[0]), String(parts[1])) }
        return (host, defaultPort)
    }

    /// %XX sequences decoded (invalid ones kept as they are); bytes that do not form UTF-8
    /// become U+FFFD.
    static func percentDecoded(_ text: String) -> String {
        let bytes = Array(text.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "%"), i + 2 < bytes.count, let high = hexValue(bytes[i + 1]), let low = hexValue(bytes[i + 2]) {
                out.append(high << 4 | low)
                i += 3
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
