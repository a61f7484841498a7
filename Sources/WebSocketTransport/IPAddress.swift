import Glibc

/// An IPv4 or IPv6 address as bytes (network order), parsed from text without DNS.
public struct IPAddress: Sendable, Hashable, CustomStringConvertible {
    /// 4 bytes (IPv4) or 16 (IPv6).
    public let bytes: [UInt8]

    public var isIPv6: Bool { bytes.count == 16 }

    /// Parses "192.0.2.1", "2001:db8::1" or "[2001:db8::1]" (inet_pton: no DNS, no
    /// shorthand IPv4 forms such as "127.1"). An IPv6 zone ("%eth0") is ignored.
    public init?(_ text: some StringProtocol) {
        var literal = String(text)
        if literal.hasPrefix("[") && literal.hasSuffix("]") { literal = String(literal.dropFirst().dropLast()) }
        if let percent = literal.firstIndex(of: "%") { literal = String(literal[..<percent]) }
        var buffer = [UInt8](repeating: 0, count: 16)
        if literal.contains(":") {
            guard inet_pton(AF_INET6, literal, &buffer) == 1 else { return nil }
            bytes = buffer
        } else {
            guard inet_pton(AF_INET, literal, &buffer) == 1 else { return nil }
            bytes = Array(buffer.prefix(4))
        }
    }

    public init?(bytes: [UInt8]) {
        guard bytes.count == 4 || bytes.count == 16 else { return nil }
        self.bytes = bytes
    }

    public var description: String {
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        bytes.withUnsafeBytes { raw in
            _ = inet_ntop(isIPv6 ? AF_INET6 : AF_INET, raw.baseAddress, &text, socklen_t(text.count))
        }
        return cString(text)
    }

    /// The address as it appears in a URL authority: IPv6 in brackets.
    public var uriForm: String { isIPv6 ? "[\(description)]" : description }

    /// Whether the first `prefix` bits of this address equal those of `network` (same
    /// family only).
    public func isIn(network: IPAddress, prefix: Int) -> Bool {
        guard bytes.count == network.bytes.count, prefix >= 0, prefix <= bytes.count * 8 else { return false }
        var remaining = prefix
        for index in bytes.indices {
            if remaining <= 0 { return true }
            let bits = min(8, remaining)
            let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - bits))
            if bytes[index] & mask != network.bytes[index] & mask { return false }
            remaining -= bits
        }
        return true
    }
}

/// A host and port as given on the command line ("example.com:443", "[::1]:8080").
public struct HostPort: Sendable, Equatable, CustomStringConvertible {
    public var host: String  // without brackets
    public var port: UInt16

    public init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// Parses `HOST:PORT` (IPv6 in brackets). With `defaultPort`, `HOST` alone is accepted.
    /// Returns nil for anything else.
    public init?(parsing text: String, defaultPort: UInt16? = nil) {
        var hostPart = Substring(text)
        var portPart: Substring?
        if text.hasPrefix("[") {
            guard let split = BracketedHost(text[...]) else { return nil }
            (hostPart, portPart) = (split.host, split.port)
            guard IPAddress(hostPart) != nil else { return nil }
        } else if let colon = text.lastIndex(of: ":") {
            hostPart = text[..<colon]
            portPart = text[text.index(after: colon)...]
            guard !hostPart.contains(":") else { return nil }  // a bare IPv6 address needs brackets
        }
        guard !hostPart.isEmpty, hostPart.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && !"/?#@[]".utf8.contains($0) } ) || text.hasPrefix("[") else {
            return nil
        }
        if let portPart {
            guard !portPart.isEmpty, portPart.count <= 5, portPart.allSatisfy(\.isASCIIDigitCharacter),
                  let value = Int(portPart), value >= 1, value <= 65535 else { return nil }
            port = UInt16(value)
        } else if let defaultPort {
            port = defaultPort
        } else {
            return nil
        }
        host = String(hostPart)
    }

    /// "host:port", with brackets around an IPv6 address.
    public var description: String { "\(host.contains(":") ? "[\(host)]" : host):\(port)" }
}

/// `[HOST]` or `[HOST]:PORT` split at its brackets, for the parsers of an address with a
/// port (`HostPort`, a proxy's hop): what the brackets hold and what follows the colon,
/// unchecked (each parser has its own rule for a host and a port). Nil when `text` does
/// not start with "[", has no "]", or has anything but ":PORT" after it.
public struct BracketedHost {
    public let host: Substring
    /// The text after "]:" (possibly empty); nil when nothing follows "]".
    public let port: Substring?

    public init?(_ text: Substring) {
        guard text.first == "[", let close = text.firstIndex(of: "]") else { return nil }
        let rest = text[text.index(after: close)...]
        guard rest.isEmpty || rest.first == ":" else { return nil }
        host = text[text.index(after: text.startIndex)..<close]
        port = rest.isEmpty ? nil : rest.dropFirst()
    }
}

extension Character {
    var isASCIIDigitCharacter: Bool { isASCII && isNumber }
}
