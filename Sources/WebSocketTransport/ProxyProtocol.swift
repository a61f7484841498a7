/// The PROXY protocol header (HAProxy's specification, versions 1 and 2) a load balancer
/// sends first on each connection it opens to us: the client's address as the balancer
/// saw it. A pure parser of the bytes received so far: it never looks past the header, so
/// the bytes after it stay the TLS handshake's or the HTTP head's.
public enum ProxyProtocol {
    /// Version 1's longest line, CRLF included ("PROXY TCP6 " + two IPv6 addresses + two ports).
    public static let v1MaximumLength = 107
    /// Version 2's 16-byte fixed part.
    public static let v2FixedLength = 16
    /// Version 2's length field is 16 bits; we take at most this many bytes after the fixed
    /// part (the addresses, 36 bytes for TCP over IPv6, and TLVs such as AWS's endpoint ID).
    public static let v2MaximumAddressLength = 1024
    /// The longest header that can be accepted: what a reader may ask for at most.
    public static let maximumLength = v2FixedLength + v2MaximumAddressLength

    /// Version 2's signature: "\r\n\r\n\0\r\nQUIT\n".
    static let v2Signature: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A]
    static let v1Prefix = Array("PROXY ".utf8)

    /// Parses `bytes` (what the connection has sent so far, from its first byte).
    public static func parse(_ bytes: some Collection<UInt8>) -> ProxyHeaderParse {
        guard let first = bytes.first else { return .needMore }
        switch first {
        case v1Prefix[0]: return parseV1(Array(bytes.prefix(v1MaximumLength)))
        case v2Signature[0]: return parseV2(Array(bytes.prefix(maximumLength)))
        default: return .invalid(.notProxy)
        }
    }

    // MARK: Version 1: "PROXY TCP4 192.0.2.1 198.51.100.1 56324 443\r\n"

    private static func parseV1(_ bytes: [UInt8]) -> ProxyHeaderParse {
        let known = min(bytes.count, v1Prefix.count)
        guard bytes.prefix(known).elementsEqual(v1Prefix.prefix(known)) else { return .invalid(.notProxy) }
        // Only printable ASCII before the CR: a client speaking something else fails at its first odd byte.
        guard let end = bytes.firstIndex(where: { $0 < 0x20 || $0 > 0x7E }) else {
            return bytes.count >= v1MaximumLength ? .invalid(.v1TooLong) : .needMore
        }
        guard bytes[end] == 0x0D else { return .invalid(.v1Malformed("a byte 0x\(hex(bytes[end])) in the line")) }
        guard end + 1 < bytes.count else { return end + 1 >= v1MaximumLength ? .invalid(.v1TooLong) : .needMore }
        guard bytes[end + 1] == 0x0A else { return .invalid(.v1Malformed("CR without LF")) }
        let length = end + 2
        let fields = bytes[v1Prefix.count..<end].split(separator: 0x20, omittingEmptySubsequences: false)
            .map { String(decoding: $0, as: UTF8.self) }
        guard let family = fields.first else { return .invalid(.v1Malformed("no protocol")) }
        if family == "UNKNOWN" { return .header(ProxyHeader(version: 1, addresses: nil, length: length)) }
        guard family == "TCP4" || family == "TCP6" else {
            return .invalid(.v1Malformed("protocol '\(family.prefix(8))' is not TCP4, TCP6 or UNKNOWN"))
        }
        guard fields.count == 5 else { return .invalid(.v1Malformed("\(fields.count - 1) fields after \(family), not 4")) }
        guard let source = IPAddress(fields[1]), let destination = IPAddress(fields[2]),
              !fields[1].contains("["), !fields[2].contains("["), !fields[1].contains("%"), !fields[2].contains("%"),
              source.isIPv6 == (family == "TCP6"), destination.isIPv6 == (family == "TCP6") else {
            return .invalid(.v1Malformed("the addresses are not \(family == "TCP4" ? "IPv4" : "IPv6")"))
        }
        guard let sourcePort = port(fields[3]), let destinationPort = port(fields[4]) else {
            return .invalid(.v1Malformed("a port is not a number from 0 to 65535"))
        }
        return .header(ProxyHeader(version: 1, addresses: ProxyHeader.Addresses(source: source, sourcePort: sourcePort,
                                                                                destination: destination, destinationPort: destinationPort),
                                   length: length))
    }

    private static func port(_ text: String) -> UInt16? {
        guard !text.isEmpty, text.count <= 5, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              text == "0" || !text.hasPrefix("0") else { return nil }
        return UInt16(text)
    }

    // MARK: Version 2: the signature, version and command, family, length, addresses, TLVs

    private static func parseV2(_ bytes: [UInt8]) -> ProxyHeaderParse {
        let known = min(bytes.count, v2Signature.count)
        guard bytes.prefix(known).elementsEqual(v2Signature.prefix(known)) else { return .invalid(.notProxy) }
        guard bytes.count >= v2FixedLength else {
            // Refuse a bad version byte as soon as it arrives.
            if bytes.count > 12, bytes[12] >> 4 != 2 { return .invalid(.v2Version(bytes[12] >> 4)) }
            return .needMore
        }
        let versionCommand = bytes[12], familyProtocol = bytes[13]
        guard versionCommand >> 4 == 2 else { return .invalid(.v2Version(versionCommand >> 4)) }
        let command = versionCommand & 0x0F
        guard command <= 1 else { return .invalid(.v2Command(command)) }
        let length = Int(bytes[14]) << 8 | Int(bytes[15])
        guard length <= v2MaximumAddressLength else { return .invalid(.v2TooLong(length)) }
        let family = familyProtocol >> 4, transport = familyProtocol & 0x0F
        guard family <= 3, transport <= 2 else { return .invalid(.v2UnknownFamily(familyProtocol)) }
        let total = v2FixedLength + length
        guard bytes.count >= total else { return .needMore }
        // LOCAL (the balancer's own health check), UNSPEC and AF_UNIX carry no IP address:
        // the socket's address stands.
        guard command == 1, family == 1 || family == 2 else { return .header(ProxyHeader(version: 2, addresses: nil, length: total)) }
        let size = family == 1 ? 4 : 16
        guard length >= 2 * size + 4 else { return .invalid(.v2ShortAddresses(length)) }
        let base = v2FixedLength
        guard let source = IPAddress(bytes: Array(bytes[base..<base + size])),
              let destination = IPAddress(bytes: Array(bytes[base + size..<base + 2 * size])) else {
            return .invalid(.v2ShortAddresses(length))
        }
        let ports = base + 2 * size
        let sourcePort = UInt16(bytes[ports]) << 8 | UInt16(bytes[ports + 1])
        let destinationPort = UInt16(bytes[ports + 2]) << 8 | UInt16(bytes[ports + 3])
        return .header(ProxyHeader(version: 2, addresses: ProxyHeader.Addresses(source: source, sourcePort: sourcePort,
                                                                                destination: destination, destinationPort: destinationPort),
                                   length: total))
    }

    private static func hex(_ byte: UInt8) -> String {
        let digits = Array("0123456789abcdef")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
    }
}

/// One PROXY header as parsed.
public struct ProxyHeader: Sendable, Equatable {
    public struct Addresses: Sendable, Equatable {
        public var source: IPAddress
        public var sourcePort: UInt16
        public var destination: IPAddress
        public var destinationPort: UInt16

        public init(source: IPAddress, sourcePort: UInt16, destination: IPAddress, destinationPort: UInt16) {
            self.source = source
            self.sourcePort = sourcePort
            self.destination = destination
            self.destinationPort = destinationPort
        }
    }

    /// 1 or 2.
    public var version: Int
    /// The client's and the balancer's addresses; nil for v1 `UNKNOWN`, v2 `LOCAL`, and v2
    /// without an IP family (the connection's own address is the client's).
    public var addresses: Addresses?
    /// The header's bytes: the connection's data starts after them.
    public var length: Int

    public init(version: Int, addresses: Addresses?, length: Int) {
        self.version = version
        self.addresses = addresses
        self.length = length
    }
}

public enum ProxyHeaderParse: Sendable, Equatable {
    /// Nothing wrong so far; the header is not complete.
    case needMore
    case header(ProxyHeader)
    case invalid(ProxyHeaderError)
}

/// Why the bytes are no PROXY header, in words for -v.
public enum ProxyHeaderError: Error, Sendable, Equatable, CustomStringConvertible {
    case notProxy
    case v1TooLong
    case v1Malformed(String)
    case v2Version(UInt8)
    case v2Command(UInt8)
    case v2UnknownFamily(UInt8)
    case v2TooLong(Int)
    case v2ShortAddresses(Int)

    public var description: String {
        switch self {
        case .notProxy: return "no PROXY protocol header (it starts with \"PROXY \" or the v2 signature)"
        case .v1TooLong: return "PROXY v1 line longer than \(ProxyProtocol.v1MaximumLength) bytes"
        case .v1Malformed(let why): return "malformed PROXY v1 line: \(why)"
        case .v2Version(let version): return "PROXY v2 signature with version \(version), not 2"
        case .v2Command(let command): return "PROXY v2 command \(command) (only LOCAL 0 and PROXY 1 exist)"
        case .v2UnknownFamily(let byte): return "PROXY v2 family/protocol 0x\(String(byte, radix: 16)) is not one we know"
        case .v2TooLong(let length):
            return "PROXY v2 header of \(length) bytes after its fixed part (at most \(ProxyProtocol.v2MaximumAddressLength))"
        case .v2ShortAddresses(let length): return "PROXY v2 address block of \(length) bytes is too short for its family"
        }
    }
}
