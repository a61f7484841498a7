import Foundation
import XCTest
import TestSupport

/// Tokens and URL passwords never reach stderr (DESIGN.md, Diagnostics).
final class SecretTests: IntegrationTestCase {
    private let token = "s3cr3t-T0KEN-value"
    private let password = "hunter2-PW"

    private func assertNoSecrets(_ result: RunResult, file: StaticString = #filePath, line: UInt = #line) {
        let basic = Data("alice:\(password)".utf8).base64EncodedString()
        for secret in [token, password, basic] {
            XCTAssertFalse(result.stderr.contains(secret), "stderr shows \(secret): \(result.stderr)", file: file, line: line)
            XCTAssertFalse(result.stdoutText.contains(secret), "stdout shows \(secret)", file: file, line: line)
        }
    }

    func testVerboseRedactsBearerToken() throws {
        let recorder = try startRecorder()
        for arguments in [["--bearer", token], []] {
            let result = try runWspipe(["-v"] + arguments + [url(recorder)], environment: ["WSPIPE_BEARER": token])
            assertExit(result, 0)
            assertStderr(result, contains: "wspipe: > Authorization: Bearer [redacted]")
            assertNoSecrets(result)
        }
        XCTAssertEqual(try recorder.record(1).values("Authorization"), ["Bearer \(token)"], "the server gets the real token")
    }

    func testVerboseNeverShowsURLPassword() throws {
        let recorder = try startRecorder()
        let result = try runWspipe(["-v", "ws://alice:\(password)@127.0.0.1:\(recorder.port)/p"])
        assertExit(result, 0)
        assertStderr(result, contains: "wspipe: > Authorization: Basic [redacted]")
        assertNoSecrets(result)
    }

    func testErrorMessagesNeverShowURLPassword() throws {
        // Refused connection (a bound port nobody listens on), with and without -v.
        let closed = try LoopbackSocket(listening: false)
        for verbose in [[], ["-v"]] {
            let result = try runWspipe(verbose + ["ws://alice:\(password)@127.0.0.1:\(closed.port)/"])
            assertExit(result, 3)
            assertNoSecrets(result)
        }
        // A refused handshake and usage errors that quote the URL.
        let reject = try startRaw("reject-401")
        let refused = try runWspipe(["-v", "ws://alice:\(password)@127.0.0.1:\(reject.port)/"])
        assertExit(refused, 5)
        assertNoSecrets(refused)
        let twoURLs = try runWspipe(["ws://alice:\(password)@127.0.0.1:1/", "ws://alice:\(password)@127.0.0.1:2/"])
        assertExit(twoURLs, 2)
        assertNoSecrets(twoURLs)
        let badPort = try runWspipe(["ws://alice:\(password)@127.0.0.1:99999/"])
        assertExit(badPort, 2)
        assertNoSecrets(badPort)
    }
}
