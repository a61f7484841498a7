// libFuzzer target `proxyheader`: the PROXY protocol header parser (ProxyProtocol.parse,
// HAProxy's v1 line and v2 binary header), as --proxy-protocol reads each connection's start.
//
// Compiled into one module with Sources/WebSocketTransport/ProxyProtocol.swift and
// IPAddress.swift (see fuzz/run).
//
// Input: the bytes a connection sends first.
//
// Checks:
//   - parsing never crashes and never reads past what it is given
//   - a header's length is within the input, at most 107 bytes for v1 and
//     ProxyProtocol.maximumLength for v2; its bytes alone parse to the same header (what
//     follows is not its), and one byte fewer needs more
//   - needMore only below the longest header; an invalid start stays invalid with a byte more
//   - a v1 header with addresses written back in the canonical form parses to the same addresses

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzProxyHeader(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let copy = exactCopy(bytes)
    defer { release(copy) }
    let result = ProxyProtocol.parse(copy)
    switch result {
    case .needMore:
        check(size < ProxyProtocol.maximumLength, "needMore after \(size) bytes")
    case .invalid:
        check(ProxyProtocol.parse(bytes + [0x0A]) == result, "an invalid start became valid with a byte more")
    case .header(let header):
        check(header.length >= 1 && header.length <= size, "length \(header.length) of \(size)")
        check(header.version == 1 ? header.length <= ProxyProtocol.v1MaximumLength : header.length <= ProxyProtocol.maximumLength,
              "v\(header.version) header of \(header.length) bytes")
        check(ProxyProtocol.parse(bytes.prefix(header.length)) == result, "the header's bytes alone parse differently")
        check(ProxyProtocol.parse(bytes.prefix(header.length - 1)) == .needMore, "one byte fewer does not need more")
        if header.version == 1, let addresses = header.addresses {
            let family = addresses.source.isIPv6 ? "TCP6" : "TCP4"
            let line = "PROXY \(family) \(addresses.source) \(addresses.destination) \(addresses.sourcePort) \(addresses.destinationPort)\r\n"
            guard case .header(let again) = ProxyProtocol.parse(Array(line.utf8)) else { checkFailed("\(line.debugDescription) does not parse") }
            check(again.addresses == addresses, "\(line.debugDescription) parses to other addresses")
        }
    }
    return 0
}
