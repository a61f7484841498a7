// The PROXY protocol header (HAProxy's v1 and v2), parsed from the bytes received so far.
import XCTest
@testable import WebSocketTransport

final class ProxyHeaderParserTests: XCTestCase {
    private let v1 = Array("PROXY TCP4 203.0.113.7 192.0.2.1 56324 443\r\n".utf8)
    private let signature: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A]
    private let request = Array("GET / HTTP/1.1\r\n".utf8)

    private func v2(command: UInt8 = 0x21, family: UInt8 = 0x11, body: [UInt8]) -> [UInt8] {
        signature + [command, family, UInt8(body.count >> 8), UInt8(body.count & 0xFF)] + body
    }

    private var v2TCP4Body: [UInt8] { [198, 51, 100, 9, 127, 0, 0, 1, 0x10, 0x92, 0x01, 0xBB] }

    private func address(_ text: String) -> IPAddress { IPAddress(text)! }

    func testV1TCP4() {
        XCTAssertEqual(ProxyProtocol.parse(v1), .header(ProxyHeader(
            version: 1, addresses: .init(source: address("203.0.113.7"), sourcePort: 56324, destination: address("192.0.2.1"), destinationPort: 443),
            length: v1.count)))
    }

    func testV1TCP6() {
        let line = Array("PROXY TCP6 2001:db8::1 2001:db8::2 4711 80\r\n".utf8)
        guard case .header(let header) = ProxyProtocol.parse(line) else { return XCTFail("\(ProxyProtocol.parse(line))") }
        XCTAssertEqual(header.addresses?.source, address("2001:db8::1"))
        XCTAssertEqual(header.addresses?.sourcePort, 4711)
        XCTAssertEqual(header.length, line.count)
    }

    /// Cut anywhere before its end, a header needs more; whole, the bytes after it are not its.
    func testEverySplitPointNeedsMoreThenTheHeaderEndsWhereItEnds() {
        for header in [v1, v2(body: v2TCP4Body), Array("PROXY UNKNOWN\r\n".utf8), v2(command: 0x20, family: 0x00, body: [])] {
            for cut in 0..<header.count {
                XCTAssertEqual(ProxyProtocol.parse(header[..<cut]), .needMore, "cut at \(cut) of \(header.count)")
            }
            guard case .header(let parsed) = ProxyProtocol.parse(header + request) else { return XCTFail("no header") }
            XCTAssertEqual(parsed.length, header.count, "the request's bytes stay the request's")
        }
    }

    func testV1UnknownUsesTheSocketsAddress() {
        let line = Array("PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n".utf8)
        XCTAssertEqual(ProxyProtocol.parse(line), .header(ProxyHeader(version: 1, addresses: nil, length: line.count)))
    }

    func testV1OverItsLengthIsRefused() {
        let long = Array(("PROXY UNKNOWN " + String(repeating: "x", count: 92) + "\r\n").utf8)  // 108 bytes
        XCTAssertEqual(long.count, 108)
        XCTAssertEqual(ProxyProtocol.parse(long), .invalid(.v1TooLong))
        XCTAssertEqual(ProxyProtocol.parse(long.prefix(107)), .invalid(.v1TooLong), "107 bytes without LF: refused without waiting")
        let longest = Array(("PROXY UNKNOWN " + String(repeating: "x", count: 91) + "\r\n").utf8)
        XCTAssertEqual(ProxyProtocol.parse(longest), .header(ProxyHeader(version: 1, addresses: nil, length: 107)))
    }

    func testV1Malformed() {
        for text in ["PROXY TCP4 203.0.113.7 192.0.2.1 56324\r\n", "PROXY TCP4 2001:db8::1 192.0.2.1 1 2\r\n",
                     "PROXY TCP6 203.0.113.7 192.0.2.1 1 2\r\n", "PROXY TCP4 203.0.113.7 192.0.2.1 65536 2\r\n",
                     "PROXY TCP4 203.0.113.7 192.0.2.1 01 2\r\n", "PROXY TCP4  203.0.113.7 192.0.2.1 1 2\r\n",
                     "PROXY UDP4 203.0.113.7 192.0.2.1 1 2\r\n", "PROXY TCP4 203.0.113.7 192.0.2.1 1 2\n",
                     "PROXY TCP4 203.0.113.7 192.0.2.1 1 2\r\r", "PROXY TCP4 127.1 192.0.2.1 1 2\r\n",
                     "PROXY TCP4 203.0.113.7 192.0.2.1 1 2 3\r\n", "PROXY TCP6 [2001:db8::1] 2001:db8::2 1 2\r\n"] {
            guard case .invalid = ProxyProtocol.parse(Array(text.utf8)) else { return XCTFail("accepted \(text.debugDescription)") }
        }
    }

    func testNotProxyAtTheFirstWrongByte() {
        XCTAssertEqual(ProxyProtocol.parse(Array("GET / HTTP/1.1\r\n".utf8)), .invalid(.notProxy))
        XCTAssertEqual(ProxyProtocol.parse(Array("PROXX".utf8)), .invalid(.notProxy))
        XCTAssertEqual(ProxyProtocol.parse([0x16, 0x03, 0x01]), .invalid(.notProxy), "a TLS ClientHello")
        XCTAssertEqual(ProxyProtocol.parse(signature.prefix(5) + [0x01]), .invalid(.notProxy))
    }

    func testV2TCP4AndTLVsAreSkipped() {
        let tlv: [UInt8] = [0x05, 0x00, 0x03, 0x61, 0x62, 0x63]  // PP2_TYPE_UNIQUE_ID "abc"
        let header = v2(body: v2TCP4Body + tlv)
        XCTAssertEqual(ProxyProtocol.parse(header + request), .header(ProxyHeader(
            version: 2, addresses: .init(source: address("198.51.100.9"), sourcePort: 4242, destination: address("127.0.0.1"), destinationPort: 443),
            length: header.count)))
    }

    func testV2TCP6() {
        let body = address("2001:db8::7").bytes + address("::1").bytes + [0x00, 0x50, 0x1F, 0x90]
        guard case .header(let header) = ProxyProtocol.parse(v2(family: 0x21, body: body)) else { return XCTFail() }
        XCTAssertEqual(header.addresses?.source, address("2001:db8::7"))
        XCTAssertEqual(header.addresses?.sourcePort, 80)
    }

    func testV2LocalAndUnspecAndUnixUseTheSocketsAddress() {
        for (command, family, body) in [(UInt8(0x20), UInt8(0x11), v2TCP4Body), (0x20, 0x00, []), (0x21, 0x00, []),
                                        (0x21, 0x31, [UInt8](repeating: 0x2F, count: 216))] {
            let header = v2(command: command, family: family, body: body)
            XCTAssertEqual(ProxyProtocol.parse(header), .header(ProxyHeader(version: 2, addresses: nil, length: header.count)))
        }
    }

    func testV2UnknownFamilyVersionCommandRefused() {
        XCTAssertEqual(ProxyProtocol.parse(v2(family: 0x41, body: v2TCP4Body)), .invalid(.v2UnknownFamily(0x41)))
        XCTAssertEqual(ProxyProtocol.parse(v2(family: 0x13, body: v2TCP4Body)), .invalid(.v2UnknownFamily(0x13)))
        XCTAssertEqual(ProxyProtocol.parse(v2(command: 0x22, body: v2TCP4Body)), .invalid(.v2Command(2)))
        XCTAssertEqual(ProxyProtocol.parse(signature + [0x11]), .invalid(.v2Version(1)), "refused at the version byte")
    }

    func testV2LengthCapped() {
        let cap = ProxyProtocol.v2MaximumAddressLength
        let over = signature + [0x21, 0x11, UInt8((cap + 1) >> 8), UInt8((cap + 1) & 0xFF)]
        XCTAssertEqual(ProxyProtocol.parse(over), .invalid(.v2TooLong(cap + 1)), "refused before its body comes")
        XCTAssertEqual(ProxyProtocol.parse(signature + [0x21, 0x11, 0xFF, 0xFF]), .invalid(.v2TooLong(65535)))
        let atCap = v2(body: v2TCP4Body + [UInt8](repeating: 0, count: cap - v2TCP4Body.count))
        guard case .header(let header) = ProxyProtocol.parse(atCap) else { return XCTFail() }
        XCTAssertEqual(header.length, ProxyProtocol.maximumLength)
    }

    func testV2AddressesShorterThanTheirFamily() {
        XCTAssertEqual(ProxyProtocol.parse(v2(body: Array(v2TCP4Body.prefix(11)))), .invalid(.v2ShortAddresses(11)))
        XCTAssertEqual(ProxyProtocol.parse(v2(family: 0x21, body: v2TCP4Body)), .invalid(.v2ShortAddresses(12)))
    }
}
