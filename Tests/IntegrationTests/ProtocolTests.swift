import XCTest
import TestSupport

/// RFC 6455 receiving rules, against raw.py's scripted frames.
final class ProtocolTests: IntegrationTestCase {
    func testFragmentedMessagesWithPingBetweenAreReassembled() throws {
        let raw = try startRaw("fragmented")
        let child = try spawnWspipe(["-b", url(raw)], stdin: .pipe)
        _ = waitForStdout(child, contains: "hello wörldbin")
        child.closeStdin()
        let result = finish(child, timeout: 10)
        assertExit(result, 0)
        XCTAssertEqual(result.stdoutText, "hello wörldbin", "\(result)")
        XCTAssertEqual(try raw.record().pongPayloads, ["between"], "the Ping between fragments was answered")
    }

    func testServerPingIsAnsweredWithSamePayload() throws {
        let raw = try startRaw("server-ping")
        let result = try runWspipe(["-v", url(raw)], stdin: .bytes(Array("hi\n".utf8)))
        assertExit(result, 0)
        assertStderr(result, contains: "received ping (13 bytes)")
        let record = try raw.record()
        XCTAssertEqual(record.pongPayloads, ["are you there"])
        XCTAssertEqual(record.texts, ["hi"])
    }

    func testEmptyCloseFromServerIsAClean0() throws {
        let raw = try startRaw("close-no-code")
        let result = finish(try spawnWspipe([url(raw)], stdin: .pipe), timeout: 10)
        assertExit(result, 0)
        assertStdout(result, "x\n")
        XCTAssertEqual(try raw.record().close?.code, 1005, "echoed as an empty Close")
    }

    private func checkProtocolError(_ scenario: String, message: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let raw = try startRaw(scenario)
        let result = finish(try spawnWspipe([url(raw)], stdin: .pipe), timeout: 10, file: file, line: line)
        assertExit(result, 6, file: file, line: line)
        XCTAssertEqual(result.stdout, [], file: file, line: line)
        assertStderr(result, contains: message, file: file, line: line)
        assertStderr(result, contains: "1002", file: file, line: line)
        XCTAssertEqual(try raw.record().close?.code, 1002, file: file, line: line)
    }

    func testMaskedServerFrameFailsWith1002() throws { try checkProtocolError("masked-frame", message: "masked") }
    func testReservedOpcodeFailsWith1002() throws { try checkProtocolError("reserved-opcode", message: "reserved opcode") }
    func testCloseCode1005OnTheWireFailsWith1002() throws { try checkProtocolError("close-bad-code", message: "1005") }
}
