// The static-file rules without sockets: IMF-fixdate both ways, one byte range, the
// validators' order (If-None-Match before If-Modified-Since), content types (the request
// path's rules are RequestPathTests').
@testable import WebSocketCore
import XCTest

final class StaticFileRulesTests: XCTestCase {
    private struct Fields: HTTPHeaderFields {
        var headers: [HTTPHeader]
        init(_ pairs: [(String, String)]) { headers = pairs.map { HTTPHeader(name: $0.0, value: $0.1) } }
    }

    func testDatesAreIMFFixdateBothWays() {
        XCTAssertEqual(HTTPDate.format(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT")  // RFC 9110's example
        XCTAssertEqual(HTTPDate.format(0), "Thu, 01 Jan 1970 00:00:00 GMT")
        XCTAssertEqual(HTTPDate.format(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT")
        XCTAssertEqual(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT"), 784_111_777)
        for seconds: Int64 in [0, 1, 86_399, 951_782_400, 1_796_000_000, 4_102_444_800] {
            XCTAssertEqual(HTTPDate.parse(HTTPDate.format(seconds)), seconds)
        }
        // The obsolete forms and anything else are not dates to us.
        for text in ["Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "Sun, 06 Nov 1994 08:49:37 UTC",
                     "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994 25:49:37 GMT", "", "Sun, 0x Nov 1994 08:49:37 GMT"] {
            XCTAssertNil(HTTPDate.parse(text), text)
        }
    }

    func testOneRangeIsServedAndTheRestIsTheWholeFile() {
        XCTAssertEqual(ByteRangeRequest.parse("bytes=0-4", size: 13), .range(first: 0, last: 4))
        XCTAssertEqual(ByteRangeRequest.parse("bytes=6-", size: 13), .range(first: 6, last: 12))
        XCTAssertEqual(ByteRangeRequest.parse("bytes=-7", size: 13), .range(first: 6, last: 12))
        XCTAssertEqual(ByteRangeRequest.parse("bytes=-100", size: 13), .range(first: 0, last: 12))
        XCTAssertEqual(ByteRangeRequest.parse("bytes=5-100", size: 13), .range(first: 5, last: 12))
        XCTAssertEqual(ByteRangeRequest.parse("Bytes=1-1", size: 13), .range(first: 1, last: 1))
        XCTAssertEqual(ByteRangeRequest.parse("bytes=13-", size: 13), .unsatisfiable)
        XCTAssertEqual(ByteRangeRequest.parse("bytes=-0", size: 13), .unsatisfiable)
        for whole in ["bytes=0-1,3-4", "items=0-1", "bytes=5-2", "bytes=a-b", "bytes=", "bytes=-", "bytes=99999999999999999999-"] {
            XCTAssertEqual(ByteRangeRequest.parse(whole, size: 13), .whole, whole)
        }
        XCTAssertEqual(ByteRangeRequest.parse("bytes=0-0", size: 0), .whole)
    }

    func testIfNoneMatchDecidesBeforeIfModifiedSince() {
        let file = FileValidators(inode: 7, size: 13, modifiedSeconds: 784_111_777, modifiedNanoseconds: 5)
        let date = "Sun, 06 Nov 1994 08:49:37 GMT"
        let now: Int64 = 1_796_000_000
        XCTAssertEqual(file.lastModified, date)
        XCTAssertTrue(file.notModified(Fields([("If-None-Match", file.etag)]), now: now))
        XCTAssertTrue(file.notModified(Fields([("If-None-Match", "\"x\", W/" + file.etag)]), now: now))
        XCTAssertTrue(file.notModified(Fields([("If-None-Match", "*")]), now: now))
        XCTAssertTrue(file.notModified(Fields([("If-Modified-Since", date)]), now: now))
        XCTAssertTrue(file.notModified(Fields([("If-Modified-Since", "Mon, 07 Nov 1994 08:49:37 GMT")]), now: now))
        XCTAssertFalse(file.notModified(Fields([("If-Modified-Since", "Sat, 05 Nov 1994 08:49:37 GMT")]), now: now))
        XCTAssertFalse(file.notModified(Fields([("If-None-Match", "\"x\""), ("If-Modified-Since", date)]), now: now))
        XCTAssertFalse(file.notModified(Fields([("If-Modified-Since", "yesterday")]), now: now))
        // An If-None-Match with no tag in it is still there: If-Modified-Since is not asked (the fuzz target found ",").
        XCTAssertFalse(file.notModified(Fields([("If-None-Match", ","), ("If-Modified-Since", date)]), now: now))
        XCTAssertFalse(file.notModified(Fields([("If-None-Match", ""), ("If-Modified-Since", date)]), now: now))
        XCTAssertTrue(file.rangeApplies(Fields([])))
        XCTAssertTrue(file.rangeApplies(Fields([("If-Range", file.etag)])))
        XCTAssertFalse(file.rangeApplies(Fields([("If-Range", "W/" + file.etag)])))
        XCTAssertTrue(file.rangeApplies(Fields([("If-Range", date)])))
        XCTAssertFalse(file.rangeApplies(Fields([("If-Range", "Sat, 05 Nov 1994 08:49:37 GMT")])))
    }

    /// A date later than the server's clock is no date to evaluate (Apache's rule): a
    /// client whose clock is ahead would keep a stale copy.
    func testIfModifiedSinceLaterThanNowIsIgnored() {
        let file = FileValidators(inode: 7, size: 13, modifiedSeconds: 784_111_777, modifiedNanoseconds: 5)
        let later = Fields([("If-Modified-Since", "Mon, 07 Nov 1994 08:49:37 GMT")])  // 784_198_177
        XCTAssertTrue(file.notModified(later, now: 784_198_177), "a date that is now is evaluated")
        XCTAssertFalse(file.notModified(later, now: 784_198_176), "a date a second ahead of the clock is ignored")
        XCTAssertFalse(file.notModified(Fields([("If-Modified-Since", "Fri, 01 Jan 2100 00:00:00 GMT")]), now: 1_796_000_000))
        // If-None-Match is no date: the clock does not matter to it.
        XCTAssertTrue(file.notModified(Fields([("If-None-Match", file.etag)]), now: 0))
    }

    func testContentTypesByExtension() {
        XCTAssertEqual(ContentTypes.forName("index.HTML"), "text/html; charset=utf-8")
        XCTAssertEqual(ContentTypes.forName("app.js"), "text/javascript; charset=utf-8")
        XCTAssertEqual(ContentTypes.forName("logo.png"), "image/png")
        XCTAssertEqual(ContentTypes.forName("a.wasm"), "application/wasm")
        XCTAssertEqual(ContentTypes.forName("README"), "application/octet-stream")
        XCTAssertEqual(ContentTypes.forName(".bashrc"), "application/octet-stream")
    }
}
