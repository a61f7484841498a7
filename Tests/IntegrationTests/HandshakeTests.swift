import XCTest
import TestSupport

/// Opening handshake details seen from a raw scripted server.
final class HandshakeTests: IntegrationTestCase {
    func testMessagesArrivingWithThe101ArePrinted() throws {
        let raw = try startRaw("with-101")
        let result = try runWspipe([url(raw)], stdin: .bytes(Array("hi\n".utf8)))
        assertExit(result, 0)
        assertStdout(result, "first\nsecond\n")
        let record = try raw.record()
        XCTAssertEqual(record.texts, ["hi"])
        XCTAssertEqual(record.close?.code, 1000)
    }
}

extension HandshakeTests {
    func testResponseHeadInSmallPiecesIsAccepted() throws {
        let raw = try startRaw("slow-101")
        let result = try runWspipe([url(raw)], stdin: .bytes(Array("hi\n".utf8)))
        assertExit(result, 0)
        assertStdout(result, "slow\n")
    }

    func testWrongAcceptIsRejectedWith5() throws {
        let raw = try startRaw("bad-accept")
        let result = try runWspipe([url(raw)])
        assertExit(result, 5)
        assertStderr(result, contains: "Sec-WebSocket-Accept")
    }

    func testSubprotocolNotOfferedIsRejectedWith5() throws {
        let raw = try startRaw("bad-subprotocol")
        for offer in [[], ["--protocol", "chat"]] {
            let result = try runWspipe(offer + [url(raw)])
            assertExit(result, 5)
            assertStderr(result, contains: "never-offered")
        }
    }
}
