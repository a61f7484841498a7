// Who the client is behind trusted proxies: CIDR ranges, X-Forwarded-For and Forwarded
// (RFC 7239) walked right to left.
import XCTest
import WebSocketTransport
@testable import WebSocketEngine

final class ClientAddressResolutionTests: XCTestCase {
    private func policy(_ ranges: [String], _ header: ClientAddressHeader = .xForwardedFor) -> ClientAddressPolicy {
        var policy = ClientAddressPolicy()
        policy.trusted = ranges.compactMap(TrustedRange.init(parsing:))
        XCTAssertEqual(policy.trusted.count, ranges.count)
        policy.header = header
        return policy
    }

    private let proxy = PeerAddress(socketAddress: "10.0.0.2:40000")

    func testRanges() {
        let ten = TrustedRange(parsing: "10.0.0.0/8")
        XCTAssertEqual(ten?.contains(PeerAddress(socketAddress: "10.200.1.1:1")), true)
        XCTAssertEqual(ten?.contains(PeerAddress(socketAddress: "11.0.0.1:1")), false)
        XCTAssertEqual(ten?.contains(PeerAddress(socketAddress: "[::ffff:10.1.2.3]:1")), true, "IPv4-mapped counts as IPv4")
        XCTAssertEqual(TrustedRange(parsing: "::ffff:10.0.0.0/104"), ten)
        XCTAssertEqual(TrustedRange(parsing: "127.0.0.1")?.description, "127.0.0.1/32")
        XCTAssertEqual(TrustedRange(parsing: "2001:db8::/32")?.contains(PeerAddress(socketAddress: "[2001:db8:5::1]:9")), true)
        XCTAssertEqual(TrustedRange(parsing: "2001:db8::/32")?.contains(PeerAddress(socketAddress: "10.0.0.1:9")), false)
        XCTAssertEqual(TrustedRange(parsing: "unix")?.contains(PeerAddress(socketAddress: "/run/ws.sock")), true)
        XCTAssertEqual(TrustedRange(parsing: "10.0.0.0/8")?.contains(PeerAddress(socketAddress: "/run/ws.sock")), false)
        for bad in ["10.0.0.0/33", "10.0.0.0/", "10.0.0.0/-1", "example.com", "[::1]", "10.1", "::/129", "", "fe80::1%eth0"] {
            XCTAssertNil(TrustedRange(parsing: bad), bad)
        }
    }

    func testUntrustedPeerIsTheClientWhateverItClaims() {
        let policy = policy(["10.0.0.0/8"])
        let stranger = PeerAddress(socketAddress: "198.51.100.1:5000")
        XCTAssertEqual(policy.client(of: stranger, header: ["203.0.113.1"]), stranger)
        XCTAssertEqual(ClientAddressPolicy().client(of: proxy, header: ["203.0.113.1"]), proxy, "nothing trusted")
    }

    func testRightToLeftSkippingTrusted() {
        let policy = policy(["10.0.0.0/8"])
        // The left-most is the client's own claim: never believed over the first untrusted hop.
        XCTAssertEqual(policy.client(of: proxy, header: ["1.1.1.1, 203.0.113.9, 10.0.0.5"]).description, "203.0.113.9")
        XCTAssertEqual(policy.client(of: proxy, header: ["203.0.113.9"]).description, "203.0.113.9")
        XCTAssertEqual(policy.client(of: proxy, header: ["10.0.0.7, 10.0.0.5"]).description, "10.0.0.7", "all trusted: the left-most")
        XCTAssertEqual(policy.client(of: proxy, header: []), proxy)
        XCTAssertEqual(policy.client(of: proxy, header: ["::ffff:203.0.113.9"]).description, "203.0.113.9")
        XCTAssertEqual(policy.client(of: proxy, header: ["[2001:db8::1]:4711"]).description, "[2001:db8::1]:4711")
        XCTAssertEqual(policy.client(of: proxy, header: ["203.0.113.9:80"]).port, 80)
    }

    func testRepeatedLinesJoinedInOrder() {
        let policy = policy(["10.0.0.0/8"])
        XCTAssertEqual(policy.client(of: proxy, header: ["203.0.113.1, 203.0.113.2", "10.0.0.9"]).description, "203.0.113.2")
        XCTAssertEqual(policy.client(of: proxy, header: ["203.0.113.1", "203.0.113.2,, "]).description, "203.0.113.2",
                       "empty elements are no hop")
    }

    func testNonAddressHopEndsTheWalkAtTheProxyThatWroteIt() {
        let policy = policy(["10.0.0.0/8"])
        XCTAssertEqual(policy.client(of: proxy, header: ["203.0.113.1, unknown"]), proxy)
        XCTAssertEqual(policy.client(of: proxy, header: ["203.0.113.1, garbage, 10.0.0.8"]).description, "10.0.0.8")
        XCTAssertEqual(policy.client(of: proxy, header: ["203.0.113.1, 999.1.1.1"]), proxy)
    }

    func testForwarded() {
        let policy = policy(["10.0.0.0/8"], .forwarded)
        XCTAssertEqual(policy.client(of: proxy, header: [#"for="[2001:db8:cafe::17]:4711";proto=https"#]).description,
                       "[2001:db8:cafe::17]:4711")
        XCTAssertEqual(policy.client(of: proxy, header: ["for=192.0.2.43, for=198.51.100.17;by=10.0.0.1"]).description, "198.51.100.17")
        XCTAssertEqual(policy.client(of: proxy, header: ["For=192.0.2.43;Proto=http"]).description, "192.0.2.43", "names are case-insensitive")
        XCTAssertEqual(policy.client(of: proxy, header: ["for=192.0.2.43", "for=10.0.0.3"]).description, "192.0.2.43")
        XCTAssertEqual(policy.client(of: proxy, header: [#"for="192.0.2.43:_port""#]).description, "192.0.2.43", "an obfuscated port is none")
        XCTAssertEqual(policy.client(of: proxy, header: ["for=192.0.2.43, for=unknown"]), proxy)
        XCTAssertEqual(policy.client(of: proxy, header: ["for=192.0.2.43, for=_hidden"]), proxy)
        XCTAssertEqual(policy.client(of: proxy, header: ["for=192.0.2.43, proto=https"]), proxy, "an element without for")
        XCTAssertEqual(policy.client(of: proxy, header: [#"for="[2001:db8::1],x", for=192.0.2.5"#]).description, "192.0.2.5",
                       "a comma inside quotes separates nothing")
        XCTAssertEqual(policy.client(of: proxy, header: [#"for="192.0.2.43"#]), proxy, "an unclosed quote")
        XCTAssertEqual(policy.client(of: proxy, header: ["for=192.0.2.43;for=192.0.2.44"]), proxy, "for twice in one element")
        XCTAssertEqual(policy.client(of: proxy, header: [#"for="\1\9\2.0.2.43""#]).description, "192.0.2.43", "quoted-pairs")
    }

    func testOnlyTheChosenHeaderCounts() {
        // The policy is given the chosen header's values only; X-Forwarded-For syntax is not Forwarded's.
        XCTAssertEqual(policy(["10.0.0.0/8"], .forwarded).client(of: proxy, header: ["203.0.113.1"]), proxy)
        XCTAssertEqual(ClientAddressHeader(name: "forwarded"), .forwarded)
        XCTAssertEqual(ClientAddressHeader(name: "x-forwarded-for"), .xForwardedFor)
        XCTAssertNil(ClientAddressHeader(name: "X-Real-IP"))
    }

    /// A client's 16 KiB of claims left of the proxies' hops: only the hops up to the first
    /// untrusted one are walked.
    func testA16KiBHeader() {
        let forwarded = policy(["10.0.0.0/8"], .forwarded)
        let policy = policy(["10.0.0.0/8"])
        let claims = (0..<1400).map { "192.0.\($0 / 250).\($0 % 250)" }.joined(separator: ", ")
        XCTAssertGreaterThan(claims.utf8.count, 16 * 1024 - 2048)
        let start = Instant.now()
        XCTAssertEqual(policy.client(of: proxy, header: [claims + ", 203.0.113.77, 10.0.0.1"]).description, "203.0.113.77")
        let elements = (0..<900).map { "for=192.0.\($0 / 250).\($0 % 250)" }.joined(separator: ", ")
        XCTAssertEqual(forwarded.client(of: proxy, header: [elements + ", for=203.0.113.78, for=10.0.0.1"]).description, "203.0.113.78")
        let garbage = String(repeating: "\"", count: 16 * 1024)
        XCTAssertEqual(forwarded.client(of: proxy, header: [garbage]), proxy)
        XCTAssertEqual(policy.client(of: proxy, header: [String(repeating: ",", count: 16 * 1024)]), proxy)
        XCTAssertLessThan(Instant.now().seconds(since: start), 1.0)
    }

    /// 16 KiB of trusted addresses: the walk stops after `maximumHops`.
    func testAtMostMaximumHopsAreWalked() {
        let policy = policy(["10.0.0.0/8"])
        let hops = (0..<1400).map { "10.0.\($0 / 250).\($0 % 250)" }
        let client = policy.client(of: proxy, header: ["203.0.113.1, " + hops.joined(separator: ", ")])
        XCTAssertEqual(client.description, hops[hops.count - ClientAddressPolicy.maximumHops])
        let short = Array(hops.suffix(ClientAddressPolicy.maximumHops - 1))
        XCTAssertEqual(policy.client(of: proxy, header: ["203.0.113.1, " + short.joined(separator: ", ")]).description, "203.0.113.1")
    }

    func testPeerAddressForms() {
        XCTAssertEqual(PeerAddress(socketAddress: "127.0.0.1:9000"), .ip(IPAddress("127.0.0.1")!, port: 9000))
        XCTAssertEqual(PeerAddress(socketAddress: "[::ffff:127.0.0.1]:9000").description, "127.0.0.1:9000")
        XCTAssertEqual(PeerAddress(socketAddress: "/run/x.sock"), .local(path: "/run/x.sock"))
        XCTAssertEqual(PeerAddress(node: "2001:db8::1")?.description, "2001:db8::1")
        XCTAssertNil(PeerAddress(node: "[192.0.2.1]"))
        XCTAssertNil(PeerAddress(node: "192.0.2.1:99999"))
        XCTAssertNil(PeerAddress(node: "example.com:80"))
        XCTAssertNil(PeerAddress(node: "[2001:db8::1]x"))
    }

    /// A hop and a command line's HOST:PORT split brackets alike (`BracketedHost`) and keep
    /// their own rules: a hop takes port 0, an obfuscated port and no port, but only IPv6
    /// in brackets; HostPort wants a port from 1 and takes any address in them.
    func testBracketedFormsOfAHopAndOfHostPort() {
        let cases: [(String, hop: String?, hostPort: String?)] = [
            ("[2001:db8::1]:4711", "[2001:db8::1]:4711", "[2001:db8::1]:4711"),
            ("[2001:db8::1]:0", "[2001:db8::1]:0", nil),
            ("[2001:db8::1]:_x", "2001:db8::1", nil),
            ("[2001:db8::1]", "2001:db8::1", nil),
            ("[192.0.2.1]:80", nil, "192.0.2.1:80"),
            ("[2001:db8::1]:", nil, nil),
            ("[2001:db8::1]:65536", nil, nil),
            ("[2001:db8::1]x", nil, nil),
            ("[2001:db8::1]]:80", nil, nil),
            ("[2001:db8::1:80", nil, nil),
            ("[]:80", nil, nil),
        ]
        for (text, hop, hostPort) in cases {
            XCTAssertEqual(PeerAddress(node: text)?.description, hop, text)
            XCTAssertEqual(HostPort(parsing: text)?.description, hostPort, text)
        }
    }
}
