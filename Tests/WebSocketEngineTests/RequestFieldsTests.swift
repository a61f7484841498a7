// The static site's header lookup (RequestFields, pure): the same answers as
// HTTPRequestHead's lowercasing lookups, through the list helpers and the validator rules.
import XCTest
import WebSocketCore
@testable import WebSocketEngine

final class RequestFieldsTests: XCTestCase {
    func testLookupsFoldASCIICaseKeepOrderAndSkipOtherHeaders() {
        let head = HTTPRequestHead(method: "GET", target: "/a", version: "HTTP/1.1", headers: [
            HTTPHeader(name: "CONNECTION", value: "keep-alive"), HTTPHeader(name: "Host", value: "x"),
            HTTPHeader(name: "if-NONE-match", value: "\"a\""), HTTPHeader(name: "Connection", value: "Close"),
            HTTPHeader(name: "Rang", value: "bytes=0-1"), HTTPHeader(name: "Ranges", value: "bytes=0-1"),
        ])
        let fields = RequestFields(head)
        XCTAssertEqual(fields.headers.map(\.name), ["CONNECTION", "if-NONE-match", "Connection"])
        for name in ["Connection", "If-None-Match", "Range", "Host", "connection"] {
            XCTAssertEqual(fields.values(name), ["Host"].contains(name) ? [] : head.values(name), name)
        }
        XCTAssertTrue(fields.listContains("Connection", "close"))
        XCTAssertFalse(StaticSite.keepsAlive(fields, version: "HTTP/1.1"))
        let validators = FileValidators(inode: 1, size: 1, modifiedSeconds: 0, modifiedNanoseconds: 0)
        let tagged = RequestFields(HTTPRequestHead(method: "GET", target: "/", version: "HTTP/1.1",
                                                   headers: [HTTPHeader(name: "IF-NONE-MATCH", value: validators.etag)]))
        XCTAssertTrue(validators.notModified(tagged, now: 0))
    }
}
