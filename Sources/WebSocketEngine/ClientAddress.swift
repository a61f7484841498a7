// Also compiled into the fuzz target `clientaddress` (fuzz/run), one module without the transport.
#if canImport(WebSocketTransport)
import WebSocketTransport
#endif

/// Who a client is: the address -v, --jsonl events, the programs' REMOTE_ADDR/REMOTE_PORT
/// and any per-address limit name. The socket's peer, or what a trusted proxy said of it
/// (a PROXY header, X-Forwarded-For, Forwarded). Held inline (every client keeps one): no
/// allocation per client.
public struct PeerAddress: Sendable, Hashable, CustomStringConvertible {
    /// The address's bytes, network order: IPv6 in both, IPv4 in the low 32 bits of `low`.
    private let high: UInt64
    private let low: UInt64
    /// 4 or 6; 0 for a Unix-socket client no proxy named.
    fileprivate let family: UInt8
    /// The port when known (the socket's, a PROXY header's, Forwarded's; X-Forwarded-For has none).
    public let port: UInt16?
    /// The listener's path, for a Unix-socket client no proxy named.
    private let path: String?

    private init(high: UInt64, low: UInt64, family: UInt8, port: UInt16?, path: String?) {
        self.high = high
        self.low = low
        self.family = family
        self.port = port
        self.path = path
    }

    /// An IP address (an IPv4-mapped IPv6 address is kept as its IPv4 address) and its port.
    public static func ip(_ given: IPAddress, port: UInt16?) -> PeerAddress {
        let bytes = given.unmapped.bytes
        func word(_ slice: ArraySlice<UInt8>) -> UInt64 { slice.reduce(0) { $0 << 8 | UInt64($1) } }
        return bytes.count == 4
            ? PeerAddress(high: 0, low: word(bytes[...]), family: 4, port: port, path: nil)
            : PeerAddress(high: word(bytes[0..<8]), low: word(bytes[8..<16]), family: 6, port: port, path: nil)
    }

    /// The address's bits for the per-address tables (`AddressKey`); nil for a Unix-socket client.
    var ipWords: (high: UInt64, low: UInt64, isIPv6: Bool)? { family == 0 ? nil : (high, low, family == 6) }

    /// A Unix-socket client: the listener's path.
    public static func local(path: String) -> PeerAddress { PeerAddress(high: 0, low: 0, family: 0, port: nil, path: path) }

    /// The address of a socket's peer as `TCPStream.remoteAddress` words it ("127.0.0.1:9000",
    /// "[::1]:9000"); anything else is a Unix socket's path.
    public init(socketAddress text: String) {
        self = PeerAddress(node: text) ?? .local(path: text)
    }

    /// One hop as proxies write it: "192.0.2.1", "192.0.2.1:4711", "2001:db8::1",
    /// "[2001:db8::1]", "[2001:db8::1]:4711" (an obfuscated port, "_x", counts as none).
    /// Nil for anything else ("unknown", "_hidden", a name, garbage).
    public init?(node given: some StringProtocol) {
        let text = Substring(given)
        var host = text, portText: Substring?
        if text.hasPrefix("[") {
            guard let split = BracketedHost(text), split.host.contains(":") else { return nil }
            (host, portText) = (split.host, split.port)
        } else if let colon = text.firstIndex(of: ":"), text.lastIndex(of: ":") == colon {
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard host.utf8.count <= 45, !host.contains("%"), let address = IPAddress(host) else { return nil }
        var port: UInt16?
        if let portText, !portText.hasPrefix("_") {
            guard !portText.isEmpty, portText.utf8.count <= 5, portText.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                  let value = UInt16(portText) else { return nil }
            port = value
        }
        self = .ip(address, port: port)
    }

    /// The IP address; nil for a Unix-socket client no proxy named.
    public var ip: IPAddress? {
        switch family {
        case 4: return IPAddress(bytes: (0..<4).map { UInt8(truncatingIfNeeded: low >> (24 - 8 * $0)) })
        case 6: return IPAddress(bytes: (0..<8).map { UInt8(truncatingIfNeeded: high >> (56 - 8 * $0)) }
                                     + (0..<8).map { UInt8(truncatingIfNeeded: low >> (56 - 8 * $0)) })
        default: return nil
        }
    }

    /// Whether the first `prefix` bits equal `network`'s (same family only), on the inline
    /// words: a header's hops are checked without an allocation.
    func isIn(_ network: PeerAddress, prefix: Int) -> Bool {
        guard family != 0, family == network.family else { return false }
        func masked(_ word: UInt64, _ bits: Int) -> UInt64 { bits <= 0 ? 0 : bits >= 64 ? word : word >> (64 - bits) }
        if family == 4 { return masked(low << 32, prefix) == masked(network.low << 32, prefix) }
        return masked(high, prefix) == masked(network.high, prefix) && masked(low, prefix - 64) == masked(network.low, prefix - 64)
    }

    /// "192.0.2.1:4711", "[2001:db8::1]:4711", "192.0.2.1", "2001:db8::1", or the socket path.
    public var description: String {
        guard let address = ip else { return path ?? "" }
        guard let port else { return address.description }
        return "\(address.uriForm):\(port)"
    }
}

extension IPAddress {
    /// An IPv4-mapped IPv6 address (::ffff:192.0.2.1, a dual-stack socket's IPv4 peer) as
    /// its IPv4 address; any other address as it is.
    public var unmapped: IPAddress {
        guard bytes.count == 16, bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF,
              let four = IPAddress(bytes: Array(bytes[12..<16])) else { return self }
        return four
    }
}

/// One --trust-proxy value: a CIDR range ("10.0.0.0/8", "2001:db8::/32", an address alone
/// for itself), or `unix` for a Unix-socket listener's peers.
public enum TrustedRange: Sendable, Hashable, CustomStringConvertible {
    case network(PeerAddress, prefix: Int)
    case unixSockets

    public init?(parsing text: String) {
        if text == "unix" {
            self = .unixSockets
            return
        }
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let first = parts.first, !first.contains("["), !first.contains("%"), let address = IPAddress(first) else { return nil }
        let bits = address.unmapped.bytes.count * 8
        var prefix = bits
        if parts.count == 2 {
            guard !parts[1].isEmpty, parts[1].utf8.count <= 3, parts[1].utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                  let value = Int(parts[1]) else { return nil }
            // A mapped network ("::ffff:10.0.0.0/104") is the IPv4 one it maps.
            prefix = address.bytes.count == 16 && address.unmapped.bytes.count == 4 ? value - 96 : value
            guard prefix >= 0, prefix <= bits else { return nil }
        }
        self = .network(.ip(address, port: nil), prefix: prefix)
    }

    public func contains(_ peer: PeerAddress) -> Bool {
        switch self {
        case .network(let network, let prefix): return peer.isIn(network, prefix: prefix)
        case .unixSockets: return peer.family == 0
        }
    }

    public var description: String {
        switch self {
        case .network(let address, let prefix): return "\(address)/\(prefix)"
        case .unixSockets: return "unix"
        }
    }
}

/// The header a trusted proxy names the client in.
public enum ClientAddressHeader: String, Sendable, CaseIterable {
    case xForwardedFor = "X-Forwarded-For"
    case forwarded = "Forwarded"

    /// Case-insensitive: "x-forwarded-for", "Forwarded".
    public init?(name: String) {
        guard let found = ClientAddressHeader.allCases.first(where: { $0.rawValue.lowercased() == name.lowercased() }) else { return nil }
        self = found
    }
}

/// --trust-proxy, --proxy-protocol and --client-address-header: which peers may name the
/// client, and how. Pure: the server asks it with the facts of each connection.
public struct ClientAddressPolicy: Sendable, Equatable {
    /// The ranges whose connections may tell us the client's address; empty: none may
    /// (the PROXY header is then believed from anyone, which the CLI warns about).
    public var trusted: [TrustedRange] = []
    /// Every connection starts with a PROXY header (v1 or v2).
    public var proxyProtocol = false
    /// The one header read from a trusted peer.
    public var header: ClientAddressHeader = .xForwardedFor

    public init() {}

    /// The most hops of a header walked (each costs an address parse and the range checks).
    public static let maximumHops = 64

    public func isTrusted(_ peer: PeerAddress) -> Bool { trusted.contains { $0.contains(peer) } }

    /// Whether a PROXY header from `peer` is believed: from anyone without --trust-proxy,
    /// else from the trusted ranges only.
    public func acceptsProxyHeader(from peer: PeerAddress) -> Bool { trusted.isEmpty || isTrusted(peer) }

    /// The client of a request that came from `peer` (the socket's, or the PROXY header's
    /// address) with `values`, the chosen header's lines in order. Untrusted `peer`: `peer`.
    /// Else the hops are walked right to left (the nearest proxy wrote the right-most one),
    /// skipping trusted addresses: the first untrusted address is the client; a hop that is
    /// no address (`unknown`, `_obfuscated`, garbage) ends the walk at the proxy that wrote
    /// it; all trusted, the left-most. At most `maximumHops` are walked: a header naming
    /// more trusted hops than that (no chain of proxies is that long; a client can write
    /// addresses of trusted ranges too) gives the last one walked.
    public func client(of peer: PeerAddress, header values: [String]) -> PeerAddress {
        guard !values.isEmpty, isTrusted(peer) else { return peer }
        var current = peer, hops = 0
        // One hop: false when the walk ends there.
        func walked(_ hop: Substring?) -> Bool {
            guard let address = hop.flatMap({ PeerAddress(node: $0) }) else { return false }
            current = address
            hops += 1
            return hops < ClientAddressPolicy.maximumHops && isTrusted(address)
        }
        if header == .forwarded {
            for hop in ForwardedHeader.forNodes(values).reversed() where !walked(hop) { break }
        } else {
            // From the right without splitting the rest: a long header of claims costs only the hops walked.
            lines: for value in values.reversed() {
                var rest = Substring(value)
                while true {
                    let comma = rest.utf8.lastIndex(of: UInt8(ascii: ","))
                    let hop = (comma.map { rest[rest.index(after: $0)...] } ?? rest).trimmingOWS()
                    if !hop.isEmpty, !walked(hop) { break lines }  // an empty element is no hop (RFC 9110 §5.6.1)
                    guard let comma else { break }
                    rest = rest[..<comma]
                }
            }
        }
        return current
    }
}

/// RFC 7239's Forwarded: `for=192.0.2.60;proto=http;by=203.0.113.43, for="[2001:db8::1]:4711"`.
enum ForwardedHeader {
    /// Each element's `for` value (unquoted), lines joined in order; nil for an element
    /// without one or that does not parse.
    static func forNodes(_ values: [String]) -> [Substring?] {
        var nodes: [Substring?] = []
        for value in values { elements(of: value, into: &nodes) }
        return nodes
    }

    /// Splits at commas outside quoted strings; for each element finds `for=`.
    private static func elements(of value: String, into nodes: inout [Substring?]) {
        var found: Substring?, valid = true, empty = true
        var position = value.startIndex
        func finishElement() {
            if !empty { nodes.append(valid ? found : nil) }  // an empty element is no hop
            found = nil
            valid = true
            empty = true
        }
        while position < value.endIndex {
            // One pair: token "=" (token / quoted-string), then ";" or "," or the end.
            var scan = position
            while scan < value.endIndex, value[scan] == " " || value[scan] == "\t" { scan = value.index(after: scan) }
            let nameStart = scan
            while scan < value.endIndex, !"=;,".contains(value[scan]) { scan = value.index(after: scan) }
            let name = value[nameStart..<scan].trimmingOWS()
            if !name.isEmpty || (scan < value.endIndex && value[scan] == "=") { empty = false }
            var pairValue: Substring?
            if scan < value.endIndex, value[scan] == "=" {
                scan = value.index(after: scan)
                if scan < value.endIndex, value[scan] == "\"" {
                    var text = ""
                    var closed = false
                    scan = value.index(after: scan)
                    while scan < value.endIndex {
                        let character = value[scan]
                        scan = value.index(after: scan)
                        if character == "\\" {
                            if scan < value.endIndex { text.append(value[scan]); scan = value.index(after: scan) }
                        } else if character == "\"" {
                            closed = true
                            break
                        } else {
                            text.append(character)
                        }
                    }
                    if !closed { valid = false }
                    pairValue = Substring(text)
                } else {
                    let start = scan
                    while scan < value.endIndex, value[scan] != ";" && value[scan] != "," { scan = value.index(after: scan) }
                    pairValue = value[start..<scan].trimmingOWS()
                }
            } else if !name.isEmpty {
                valid = false
            }
            while scan < value.endIndex, value[scan] == " " || value[scan] == "\t" { scan = value.index(after: scan) }
            if name.lowercased() == "for" {
                if found != nil { valid = false }  // a parameter at most once per element (§4)
                found = pairValue
            }
            if scan < value.endIndex {
                let separator = value[scan]
                scan = value.index(after: scan)
                if separator == "," { finishElement() } else if separator != ";" { valid = false }
            }
            position = scan
        }
        finishElement()
    }
}

extension Substring {
    /// Without the spaces and tabs around it (HTTP's optional whitespace).
    func trimmingOWS() -> Substring {
        var result = self
        while let first = result.first, first == " " || first == "\t" { result = result.dropFirst() }
        while let last = result.last, last == " " || last == "\t" { result = result.dropLast() }
        return result
    }
}
