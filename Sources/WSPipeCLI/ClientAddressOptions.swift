import WebSocketEngine

// The real client address behind a proxy (SERVER "Behind a proxy" in the man page).
extension Option {
    static let trustProxy = Option("--trust-proxy", value: "CIDR", in: .access, applies: .server,
                                   help: "a proxy's range (10.0.0.0/8, ::1, unix) whose connections may name",
                                   "the client (repeatable): PROXY headers, --client-address-header") { text, name throws(UsageError) in
        guard let range = TrustedRange(parsing: text) else {
            throw UsageError("\(name) '\(text.prefix(60))' is not an address range (192.0.2.0/24, 2001:db8::/32, an address, or unix)")
        }
        return { $0.clientAddress.trusted.append(range) }
    }
    static let proxyProtocol = Option("--proxy-protocol", in: .access, applies: .server,
                                      help: "every connection starts with a PROXY header (v1 or v2, from HAProxy,",
                                      "nginx, a load balancer): its client is the client; none: closed") {
        $0.clientAddress.proxyProtocol = true
    }
    static let clientAddressHeader = Option("--client-address-header", value: "NAME", in: .access, applies: .server,
                                            help: "X-Forwarded-For (default) or Forwarded: the header a --trust-proxy",
                                            "peer names the client in") { text, name throws(UsageError) in
        guard let header = ClientAddressHeader(name: text) else {
            throw UsageError("\(name) '\(text.prefix(60))' is not X-Forwarded-For or Forwarded")
        }
        return { $0.clientAddress.header = header }
    }
}
