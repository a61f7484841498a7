// libFuzzer target `clientaddress`: who the client is behind trusted proxies
// (ClientAddressPolicy.client: X-Forwarded-For and RFC 7239 Forwarded walked right to left),
// the hop parser (PeerAddress(node:)) and --trust-proxy's ranges (TrustedRange).
//
// Compiled into one module with Sources/WebSocketEngine/ClientAddress.swift and the
// transport's IPAddress.swift (see fuzz/run).
//
// Input: byte 0: bit 0 the header (0 X-Forwarded-For, 1 Forwarded), bit 1 whether the
// peer is trusted (10.0.0.1, else 192.0.2.1), bit 2 whether 2001:db8::/32 is trusted too;
// the rest, split at LF, the header's lines.
//
// Checks:
//   - nothing crashes, whatever the lines
//   - an untrusted peer is the client whatever the header says
//   - a client other than the peer is an IP address that parses back from its description;
//     an empty line more changes nothing (an empty element is no hop)
//   - every line, as a hop and as a range, parses back from its own description

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzClientAddress(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size >= 1 else { return 0 }
    let flags = data[0]
    let rest = UnsafeBufferPointer(start: data + 1, count: size - 1)
    let lines = rest.split(separator: 0x0A, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
    var policy = ClientAddressPolicy()
    policy.header = flags & 1 == 0 ? .xForwardedFor : .forwarded
    policy.trusted = [TrustedRange(parsing: "10.0.0.0/8")!] + (flags & 4 != 0 ? [TrustedRange(parsing: "2001:db8::/32")!] : [])
    let peer = PeerAddress(socketAddress: flags & 2 != 0 ? "10.0.0.1:4000" : "192.0.2.1:4000")
    let client = policy.client(of: peer, header: lines)
    if !policy.isTrusted(peer) { check(client == peer, "an untrusted peer's header was read") }
    if client != peer {
        check(client.ip != nil, "a client without an address: \(client)")
        check(PeerAddress(node: client.description) == client, "the client \(client) does not parse back")
        check(policy.client(of: peer, header: lines + [""]) == client, "an empty line is a hop")
    }
    for line in lines.prefix(4) {
        if let hop = PeerAddress(node: line) {
            check(PeerAddress(node: hop.description) == hop, "hop \(line.debugDescription) -> \(hop) does not parse back")
        }
        if let range = TrustedRange(parsing: line) {
            check(TrustedRange(parsing: range.description) == range, "range \(line.debugDescription) -> \(range) does not parse back")
        }
    }
    return 0
}
