// HTTP field text is trimmed and split by byte (RFC 9110 §5.5, §5.6), never by Swift
// Character: a space or comma followed by a combining mark is one grapheme cluster.
import XCTest
@testable import WebSocketCore

final class HTTPTextTests: XCTestCase {
    func testTrimmingIsByteBasedEvenBeforeACombiningMark() {
        // " \u{301}b": the space and the combining acute accent form one Character.
        XCTAssertEqual(Array(HTTPText.trimmed(" \u{301}b\t").utf8), [0xCC, 0x81, 0x62])
        XCTAssertEqual(HTTPText.trimmed("\t a b \t"), "a b")
        XCTAssertEqual(HTTPText.trimmed(" \t "), "")
        XCTAssertEqual(HTTPText.trimmed("tok\r\n", also: [0x0A, 0x0D]), "tok")
    }

    func testListsSplitAtEveryCommaByte() {
        XCTAssertEqual(HTTPText.list("keep-alive, Upgrade"), ["keep-alive", "Upgrade"])
        XCTAssertEqual(HTTPText.list(" , a ,, b , "), ["a", "b"])
        // ",\u{301}" is one Character; as bytes it is a comma and then the mark.
        XCTAssertEqual(HTTPText.list("a,\u{301}b").map { Array($0.utf8) }, [[0x61], [0xCC, 0x81, 0x62]])
        XCTAssertEqual(HTTPText.list("permessage-deflate; client_max_window_bits", separator: UInt8(ascii: ";")),
                       ["permessage-deflate", "client_max_window_bits"])
    }

    func testCommandLineHeaderValueIsTrimmedByByte() throws {
        let header = try HTTPHeader(parsing: "X-Mark: \u{301}b ")
        XCTAssertEqual(Array(header.value.utf8), [0xCC, 0x81, 0x62])
    }

    func testFoldedEmptyValueIsJoinedWithoutALeadingSpace() throws {
        let text = "HTTP/1.1 101 Switching Protocols\r\nUpgrade:\r\n websocket\r\nX-Trailing: a\r\n \r\n\r\n"
        let parsed = try Array(text.utf8).withUnsafeBytes { try HTTPResponseHead.parse($0) }
        XCTAssertEqual(parsed?.0.values("Upgrade"), ["websocket"])
        XCTAssertEqual(parsed?.0.values("X-Trailing"), ["a"])
    }
}
