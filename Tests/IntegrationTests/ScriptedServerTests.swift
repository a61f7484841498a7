import XCTest
import TestSupport

/// Byte-level server behaviour, scripted from here through raw.py's `script` scenario.
final class ScriptedServerTests: IntegrationTestCase {
    // MARK: Frames that break RFC 6455: we fail the connection (exit 6)

    private func checkFailure(_ frames: [UInt8], code: Int, _ what: String,
                              file: StaticString = #filePath, line: UInt = #line) throws {
        let server = try startScripted(Wire.switching + frames)
        let result = finish(try spawnWspipe([url(server)], stdin: .pipe), timeout: 10, file: file, line: line)
        assertExit(result, 6, file: file, line: line)
        XCTAssertTrue(result.stderr.contains("\(code)"), "\(what): stderr lacks \(code): \(result.stderr)", file: file, line: line)
        XCTAssertEqual(try server.record().close?.code, code, what, file: file, line: line)
    }

    func testControlFrameOver125BytesFails1002() throws {
        try checkFailure(Wire.frame(0x9, Array(repeating: 0x61, count: 126)), code: 1002, "126-byte ping")
    }

    func testFragmentedControlFrameFails1002() throws {
        try checkFailure(Wire.frame(0x9, Array("p".utf8), fin: false), code: 1002, "ping without FIN")
    }

    func testReservedBitFails1002() throws {
        try checkFailure(Wire.frame(0x1, Array("x".utf8), rsv: 0b100), code: 1002, "RSV1 without an extension")
    }

    func testContinuationWithoutStartFails1002() throws {
        try checkFailure(Wire.frame(0x0, Array("x".utf8)), code: 1002, "orphan continuation")
    }

    func testNewMessageInsideFragmentedOneFails1002() throws {
        try checkFailure(Wire.text("a", fin: false) + Wire.text("b"), code: 1002, "text frame inside a fragmented message")
    }

    func testLengthWithTopBitSetFails1002() throws {
        try checkFailure([0x82, 0x7F, 0x80, 0, 0, 0, 0, 0, 0, 1], code: 1002, "64-bit length with the top bit set")
    }

    func testCloseWithOneBytePayloadFails1002() throws {
        try checkFailure(Wire.frame(0x8, [0x03]), code: 1002, "1-byte Close payload")
    }

    func testCloseWithReservedCodesFails1002() throws {
        for code: UInt16 in [999, 1004, 1006, 1015, 1016, 2999] {
            try checkFailure(Wire.close(code), code: 1002, "Close code \(code)")
        }
    }

    func testCloseReasonNotUTF8Fails1007() throws {
        try checkFailure(Wire.close(1000, [0x62, 0xFF]), code: 1007, "Close reason with 0xFF")
    }

    func testTextEndingInsideACharacterFails1007() throws {
        // "é" is C3 A9; the message ends after C3.
        try checkFailure(Wire.frame(0x1, [0x61, 0xC3], fin: false) + Wire.frame(0x0, [], fin: true), code: 1007,
                         "text ending in the middle of a UTF-8 sequence")
    }

    // MARK: Frames that are fine

    func testApplicationCloseCodesAreAccepted() throws {
        for (code, status) in [(UInt16(3000), Int32(8)), (4999, 8), (1001, 8), (1000, 0)] {
            let server = try startScripted(Wire.switching + Wire.text("m") + Wire.close(code, Array("r".utf8)), then: "close")
            let result = finish(try spawnWspipe([url(server)], stdin: .pipe), timeout: 10)
            assertExit(result, status)
            assertStdout(result, "m\n")
            if status == 8 { assertStderr(result, contains: "\(code)") }
        }
    }

    func testServerClosingTCPRightAfterItsCloseIsAClean0() throws {
        // Many servers send Close and hang up without waiting for the echo.
        let server = try startScripted(Wire.switching + Wire.text("one") + Wire.text("two") + Wire.close(1000), then: "close")
        let result = finish(try spawnWspipe([url(server)], stdin: .pipe), timeout: 10)
        assertExit(result, 0)
        assertStdout(result, "one\ntwo\n")
        XCTAssertEqual(result.stderr, "")
    }

    func testEmptyMessagesAndFragmentsOfZeroLength() throws {
        let frames = Wire.text("") + Wire.text("a", fin: false) + Wire.frame(0x0, [], fin: false) + Wire.frame(0x0, Array("b".utf8))
            + Wire.text("") + Wire.close(1000)
        let server = try startScripted(Wire.switching + frames)
        let result = finish(try spawnWspipe([url(server)], stdin: .pipe), timeout: 10)
        assertExit(result, 0)
        assertStdout(result, "\nab\n\n")
    }

    func testLargeFramesWith16And64BitLengths() throws {
        let medium = String(repeating: "m", count: 60_000)
        let large = String(repeating: "L", count: 300_000)
        let server = try startScripted(Wire.switching + Wire.text(medium) + Wire.text(large) + Wire.close(1000))
        let result = finish(try spawnWspipe([url(server)], stdin: .pipe), timeout: 10)
        assertExit(result, 0)
        XCTAssertTrue(result.stdoutText == medium + "\n" + large + "\n", "\(result.stdout.count) bytes")
    }

    // MARK: Handshake responses

    private func checkHandshake(_ response: String, status: Int32, stderr: String? = nil, then: String = "behave",
                                file: StaticString = #filePath, line: UInt = #line) throws {
        let server = try startScripted(Array(response.utf8), then: then)
        let result = try runWspipe([url(server)], stdin: .bytes(Array("hi\n".utf8)), timeout: 10, file: file, line: line)
        assertExit(result, status, file: file, line: line)
        if let stderr { assertStderr(result, contains: stderr, file: file, line: line) }
    }

    func testLenientButValidResponsesAreAccepted() throws {
        // Bare LF line ends; other case; Connection with several tokens; spaces around the
        // Accept value; a folded header; a reason phrase that is not the usual one.
        try checkHandshake("HTTP/1.1 101 Switching Protocols\nUpgrade: websocket\nConnection: Upgrade\nSec-WebSocket-Accept: {accept}\n\n",
                           status: 0)
        try checkHandshake("HTTP/1.1 101 OK\r\nupgrade: WebSocket\r\nconnection: keep-alive, upgrade\r\n"
                           + "sec-websocket-accept:   {accept}  \r\nX-Folded: a\r\n  b\r\n\r\n", status: 0)
    }

    func testInvalidResponsesAreRejectedWith5() throws {
        let accept = "Sec-WebSocket-Accept: {accept}\r\n"
        let cases: [(String, String)] = [
            ("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "200"),
            ("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n\(accept)\r\n", "Upgrade"),
            ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\(accept)\r\n", "Upgrade"),
            ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\(accept)\r\n", "Connection"),
            ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", "Sec-WebSocket-Accept"),
            ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\(accept)\(accept)\r\n",
             "Sec-WebSocket-Accept"),
            ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\(accept)"
             + "Sec-WebSocket-Extensions: x-webkit-deflate-frame\r\n\r\n", "x-webkit-deflate-frame"),
            ("SSH-2.0-OpenSSH_9.2\r\n\r\n", "not HTTP"),
        ]
        for (response, message) in cases {
            try checkHandshake(response, status: 5, stderr: message)
        }
    }

    func testConnectionClosedDuringTheHandshakeIs5() throws {
        try checkHandshake("", status: 5, stderr: "without answering", then: "close")
        try checkHandshake("HTTP/1.1 101 Switching", status: 5, stderr: "in the middle", then: "close")
    }

    func testResponseHeadOver64KiBIsRefused() throws {
        let filler = (0..<1100).map { "X-Filler-\($0): \(String(repeating: "f", count: 50))\r\n" }.joined()
        try checkHandshake("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                           + "Sec-WebSocket-Accept: {accept}\r\n" + filler + "\r\n", status: 5, then: "hold")
    }
}
