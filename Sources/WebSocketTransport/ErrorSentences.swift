import Glibc

/// How a face names its settings in the advice error sentences carry and in the lines the
/// dialer logs: the facts and the wording are the transport's, the names are the face's
/// (the CLI says "--cacert FILE", the library "tls.caFile"). A nil name leaves that advice
/// out.
public struct SettingNames: Sendable {
    /// Where a proxy came from ("--proxy", or the variable's name); nil: not said.
    public var proxySource: @Sendable (ProxySource) -> String?
    /// Restricting DNS to one family ("-4", "-6").
    public var ipv4Only: String?
    public var ipv6Only: String?
    /// The limit a connect timeout was ("--connect-timeout").
    public var connectTimeout: String
    /// The CA file to trust ("--cacert FILE").
    public var caFile: String
    /// Skipping certificate verification ("-k/--insecure").
    public var insecure: String?
    /// Giving a key's passphrase ("--key-pass-env VAR or --key-pass-file FILE").
    public var keyPassphrase: String
    /// Giving the key file ("--key").
    public var keyFile: String?
    /// Giving a client certificate and its key ("--cert and --key").
    public var clientCertificate: String?
    /// The client certificate setting alone ("--cert").
    public var certificate: String?
    /// The lowest TLS version accepted ("--tls-min").
    public var minimumVersion: String?
    // The dialer's log lines (-v):
    /// The proxy setting, as a route's source ("--proxy").
    public var proxy: String
    /// The proxy setting turned off, as a direct route's reason ("--proxy ''").
    public var proxyOff: String
    /// The hosts that go without a proxy, given as a setting ("--noproxy").
    public var noProxy: String
    /// Dialing another host and port than the URL's ("--connect-to").
    public var connectTo: String
    /// Certificate verification turned off, noted on an established TLS connection
    /// ("--insecure").
    public var verificationOff: String

    public init(proxySource: @escaping @Sendable (ProxySource) -> String?, ipv4Only: String?, ipv6Only: String?,
                connectTimeout: String, caFile: String, insecure: String?, keyPassphrase: String, keyFile: String?,
                clientCertificate: String?, certificate: String?, minimumVersion: String?,
                proxy: String, proxyOff: String, noProxy: String, connectTo: String, verificationOff: String) {
        self.proxySource = proxySource
        self.ipv4Only = ipv4Only
        self.ipv6Only = ipv6Only
        self.connectTimeout = connectTimeout
        self.caFile = caFile
        self.insecure = insecure
        self.keyPassphrase = keyPassphrase
        self.keyFile = keyFile
        self.clientCertificate = clientCertificate
        self.certificate = certificate
        self.minimumVersion = minimumVersion
        self.proxy = proxy
        self.proxyOff = proxyOff
        self.noProxy = noProxy
        self.connectTo = connectTo
        self.verificationOff = verificationOff
    }
}

extension TransportError {
    /// One sentence for a person, with `names` in its advice.
    public func sentence(_ names: SettingNames) -> String {
        func from(_ source: ProxySource) -> String { names.proxySource(source).map { " (from \($0))" } ?? "" }
        switch self {
        case .resolve(let host, let reason, let family, let via, let connectTo):
            var text = "cannot resolve host '\(host)'\(connectTo ? " (\(names.connectTo))" : ""): \(reason)"
            switch family {
            case .any: break
            case .ipv4: text += " (looking for IPv4 addresses only\(names.ipv4Only.map { ": \($0)" } ?? ""))"
            case .ipv6: text += " (looking for IPv6 addresses only\(names.ipv6Only.map { ": \($0)" } ?? ""))"
            }
            if let via { text += " (the \(via.proxy.kind.label)\(names.proxySource(via.source).map { " from \($0)" } ?? ""))" }
            return text
        case .noAddress(let host, let family, let available):
            let flag = family == .ipv4 ? names.ipv4Only : names.ipv6Only
            let wanted = (family == .ipv4 ? "IPv4" : "IPv6") + (flag.map { " (\($0))" } ?? "")
            return "cannot resolve host '\(host)': no \(wanted) address (it has \(available.joined(separator: ", ")))"
        case .connect(let target, let code, nil):
            return "cannot connect to \(target): \(errnoText(code))"
        case .connect(_, let code, let via?):
            return "cannot connect to the \(via.proxy.name)\(from(via.source)): \(errnoText(code))"
        case .unixConnect(let path, let code, let notASocket):
            let why = notASocket ? " (the file is not a socket)" : code == ECONNREFUSED ? " (nothing is listening on it)" : ""
            return "cannot connect to Unix socket \(path): \(errnoText(code))\(why)"
        case .timedOut(let stage, let seconds):
            // Which limit it was, unless the stage ends with its own advice in parentheses.
            let text = "timed out after \(formatSeconds(seconds)) s \(stage.sentence(names))"
            return text.hasSuffix(")") ? text : "\(text) (\(names.connectTimeout))"
        case .tls(let failure, let proxy):
            return "TLS: " + (proxy.map { "with the \($0.name): " } ?? "") + failure.sentence(names)
        case .proxy(let failure):
            return failure.description
        case .proxyVariable(let error):
            return error.description
        case .unixPathLength(let path, let limit):
            return "the Unix socket path '\(path)' is empty or longer than \(limit) bytes"
        case .system(let call, let code):
            return "\(call) failed: \(errnoText(code))"
        }
    }
}

extension Stage {
    /// Where the opening was, as the end of a sentence ("connecting to 10.0.0.1:443").
    public func sentence(_ names: SettingNames) -> String {
        switch self {
        case .resolving(let host): return "resolving '\(host)'"
        case .connecting(let target): return "connecting to \(target)"
        case .connectingUnix(let path, let full): return "connecting to Unix socket \(path)\(full ? " (its backlog is full)" : "")"
        case .connectingToProxy(let hop):
            return "connecting to the \(hop.proxy.name)\(names.proxySource(hop.source).map { " (from \($0))" } ?? "")"
        case .tlsHandshake(nil): return "in the TLS handshake"
        case .tlsHandshake(let proxy?): return "in the TLS handshake with the \(proxy.name)\(TLSOptions.plainHTTPProxyHint)"
        case .proxyExchange(let proxy, let step): return step.describe(proxy)
        case .sendingHandshake: return "sending the handshake"
        case .awaitingHandshakeResponse: return "waiting for the server's handshake response"
        }
    }
}

extension TLSFailure {
    /// One sentence for a person, with `names` in its advice.
    public func sentence(_ names: SettingNames) -> String {
        let giveOne = names.clientCertificate.map { " (give one with \($0))" } ?? ""
        switch self {
        case .libraryMissing(let why): return why
        case .setup(let reason): return "cannot create a TLS session: \(reason)"
        case .trustStore(let path?, let reason):
            return "cannot load CA certificates from '\(path)': \(TLSFailure.fileTrouble(reason, holds: "certificate"))"
        case .trustStore(nil, let reason): return "cannot load the system CA store: \(reason)"
        case .certificateFile(let path, let reason):
            return "cannot load the client certificate from '\(path)': \(TLSFailure.fileTrouble(reason, holds: "certificate"))"
        case .keyNeedsPassphrase(let path):
            return "the private key in '\(path)' is encrypted: give its passphrase with \(names.keyPassphrase)"
        case .wrongPassphrase(let path): return "cannot decrypt the private key in '\(path)': wrong passphrase"
        case .keyMismatch(let key, let certificate):
            return "the private key in '\(key)' does not belong to the certificate in '\(certificate)'"
        case .noPrivateKey(let path, let reason):
            return "no private key in '\(path)'\(names.keyFile.map { " (give the key file with \($0))" } ?? "") [\(reason)]"
        case .keyFile(let path, let reason):
            return "cannot load the private key from '\(path)': \(TLSFailure.fileTrouble(reason, holds: "private key"))"
        case .verification(let check, let name, let detail):
            let reason: String
            switch check {
            case .expired: reason = "the server's certificate has expired"
            case .notYetValid: reason = "the server's certificate is not valid yet"
            case .nameMismatch: reason = "the server's certificate is not valid for '\(name)'"
            case .unknownCA: reason = "the server's certificate is signed by an unknown CA (trust it with \(names.caFile))"
            case .selfSigned: reason = "the server's certificate is self-signed (trust that certificate itself with \(names.caFile))"
            case .notForServers:
                reason = "the server's certificate is not meant for a TLS server (its extended key usage lacks serverAuth)"
            case .issuerNotCA:
                reason = "the server's certificate is signed by a certificate that is no CA's (basicConstraints without CA:TRUE)"
            case .tooWeak:
                reason = "the server's certificate chain has a key or signature too weak for OpenSSL's security level "
                    + "(RSA under 2048 bits, SHA-1)"
            case .other: reason = "the server's certificate was refused"
            }
            return "certificate verification failed for '\(name)': \(reason) [\(detail)]"
                + (names.insecure.map { "; \($0) skips verification" } ?? "")
        case .certificateRequired(let detail):
            return "the server requires a client certificate\(giveOne) and ended the handshake [\(detail)]"
        case .certificateRequiredThenClosed:
            return "the server asked for a client certificate and closed the connection without one: it requires a client "
                + "certificate\(giveOne)"
        case .certificateProbablyRefused:
            return "the server closed the connection right after the TLS handshake without answering: it probably refused "
                + "the client certificate\(names.certificate.map { " (\($0))" } ?? "")"
        case .closedDuringHandshake(let hint):
            return "the server closed the connection during the TLS handshake" + hint
        case .handshakeFailed(.tls(let alert), let hint):
            return "handshake failed: \(alert.sentence(names))" + (hint ?? "")
        case .handshakeFailed(let why, let hint):
            return "handshake failed: \(why)" + (hint ?? "")
        case .alert(let alert):
            return alert.sentence(names)
        }
    }
}

extension TLSFailure {
    /// One sentence for a person about a server's TLS configuration that `TLSServerContext`
    /// could not load: the server's certificate and key, `clientCA` naming the face's
    /// setting of the client CA file (mutual TLS); the rest as `sentence(names)`.
    public func serverSentence(_ names: SettingNames, clientCA: String) -> String {
        switch self {
        case .certificateFile(let path, let reason):
            return "cannot load the server certificate from '\(path)': \(TLSFailure.fileTrouble(reason, holds: "certificate"))"
        case .keyFile(let path, let reason):
            return "cannot load the server's private key from '\(path)': \(TLSFailure.fileTrouble(reason, holds: "private key"))"
        case .trustStore(let path?, let reason):
            return "cannot load the client CA certificates from '\(path)' (\(clientCA)): \(TLSFailure.fileTrouble(reason, holds: "certificate"))"
        case .setup(let reason): return "cannot set up TLS for the server: \(reason)"
        default: return sentence(names)
        }
    }
}

extension TLSFailure {
    /// OpenSSL's reason for a PEM file it could not load (`holds`: what the file is for,
    /// "certificate" or "private key"), in words a shell user reads, OpenSSL's own after them
    /// in brackets; a reason not known here as it is.
    static func fileTrouble(_ reason: String, holds: String) -> String {
        let words: String
        if reason.contains("no start line") || reason.contains("no certificate or crl found") {
            words = "it holds no \(holds) in PEM form (-----BEGIN \(holds.uppercased())-----)"
        } else if reason.hasPrefix("unsupported") {
            words = "it holds no \(holds) OpenSSL can read"
        } else if reason.contains("key too small") {
            words = "its key is too small for OpenSSL's security level (RSA needs 2048 bits or more)"
        } else if reason.contains("md too weak") {
            words = "its signature's digest is too weak for OpenSSL's security level (SHA-1, MD5)"
        } else {
            return reason
        }
        return "\(words) [\(reason)]"
    }
}

extension TLSAlert {
    /// One sentence for a person, with `names` in its advice.
    public func sentence(_ names: SettingNames) -> String {
        switch self {
        case .certificateRequired(let detail):
            return "the server requires a client certificate\(names.clientCertificate.map { " (give one with \($0))" } ?? "") [\(detail)]"
        case .handshakeRefused(let detail):
            return "the server ended the handshake (no common protocol or cipher, or it wants a client certificate"
                + "\(names.clientCertificate.map { ": \($0)" } ?? "")) [\(detail)]"
        case .noCommonVersion(let detail):
            return "no TLS version that both sides accept\(names.minimumVersion.map { " (see \($0))" } ?? "") [\(detail)]"
        case .certificateRefused:
            return description
        case .other(let detail):
            return TLSAlert.worded(detail)
        }
    }

    /// An alert the peer sent, in OpenSSL's words ("tlsv1 alert access denied",
    /// "tlsv1 unrecognized name"), as a sentence with those words in brackets; any other
    /// reason as it is.
    static func worded(_ detail: String) -> String {
        if detail.contains("unrecognized name") {
            return "the server does not serve the name asked for (the TLS server name, SNI) [\(detail)]"
        }
        guard let found = detail.firstRange(of: " alert ") else { return detail }
        let alert = detail[found.upperBound...].prefix { $0 != ";" }
        return "the server sent the TLS alert '\(alert)' [\(detail)]"
    }
}
