import XCTest
@testable import WebSocketCore

final class ByteCountTests: XCTestCase {
    func testUnits() {
        XCTAssertEqual(ByteCount.text(0), "0 B")
        XCTAssertEqual(ByteCount.text(1023), "1023 B")
        XCTAssertEqual(ByteCount.text(1024), "1 KiB")
        XCTAssertEqual(ByteCount.text(1536), "1.5 KiB")
        XCTAssertEqual(ByteCount.text(64 << 20), "64 MiB")
        XCTAssertEqual(ByteCount.text(100 << 20), "100 MiB")
        XCTAssertEqual(ByteCount.text(3 << 30), "3 GiB")
        XCTAssertEqual(ByteCount.text(1024 * 1024 - 1), "1 MiB", "1023.999 KiB rounds up into the next unit")
        XCTAssertEqual(ByteCount.text(5000 << 30), "5000 GiB")
    }

    func testMessageTooBigSaysSizesInUnits() {
        XCTAssertEqual(ReceiveError.messageTooBig(size: 104_857_600, limit: 67_108_864).description,
                       "a message of at least 100 MiB exceeds the limit of 64 MiB")
        // Sizes that round alike keep their exact counts.
        XCTAssertEqual(ReceiveError.messageTooBig(size: 65_537, limit: 65_536).description,
                       "a message of at least 64 KiB (65537 bytes) exceeds the limit of 64 KiB (65536 bytes)")
        XCTAssertEqual(ReceiveError.messageTooBig(size: 11, limit: 10).description,
                       "a message of at least 11 B exceeds the limit of 10 B")
    }

    func testTheReaderReportsTheSizeItSaw() {
        var reader = MessageReader(maximumMessageSize: 1 << 20)
        var header: [UInt8] = [0x82, 127, 0, 0, 0, 0, 0, 0x20, 0, 0]  // binary, 2 MiB, unmasked
        var index = 0
        XCTAssertThrowsError(try header.withUnsafeMutableBytes { raw in try reader.next(raw, &index) }) { error in
            XCTAssertEqual(error as? ReceiveError, .messageTooBig(size: 2 << 20, limit: 1 << 20))
        }
    }
}
