import Foundation
import XCTest
import TestSupport

/// With -v, a bearer token, a URL password, a Cookie header and an X-Api-Key header never
/// reach wspipe's stderr or stdout, however the session ends (SecretTests covers the
/// bearer token and URL password alone; this adds the headers and more endings).
final class SecretLeakTests: IntegrationTestCase {
    private let token = "tok-9f8e7d6c5b4a"
    private let passwordInURL = "pw%21Zq8x-7y6"     // percent-encoded in the URL...
    private let password = "pw!Zq8x-7y6"            // ...and decoded
    private let cookie = "ck-4d3c2b1a0f"
    private let apiKey = "ak-1a2b3c4d5e"

    private var secrets: [String] {
        [token, passwordInURL, password, cookie, apiKey,
         Data("alice:\(password)".utf8).base64EncodedString()]
    }

    /// The two ways of sending credentials: bearer (it replaces Basic) and Basic from the URL.
    private func argumentSets(_ target: String) -> [[String]] {
        let headers = ["-H", "Cookie: sid=\(cookie); theme=dark", "-H", "X-Api-Key: \(apiKey)"]
        return [["-v", "--bearer", token] + headers + [target], ["-v"] + headers + [target]]
    }

    private func withUserInfo(_ scheme: String, _ port: Int, host: String = "127.0.0.1") -> String {
        "\(scheme)://alice:\(passwordInURL)@\(host):\(port)/feed?x=1"
    }

    private func assertNoSecrets(_ result: RunResult, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        for secret in secrets {
            XCTAssertFalse(result.stderr.contains(secret), "\(what): stderr shows \(secret):\n\(result.stderr)", file: file, line: line)
            XCTAssertFalse(result.stdoutText.contains(secret), "\(what): stdout shows \(secret)", file: file, line: line)
        }
        XCTAssertTrue(result.stderr.contains("wspipe: * ") || result.stderr.contains("wspipe: "), "\(what): -v said nothing",
                      file: file, line: line)
    }

    func testSuccessfulSessionShowsNoSecretEvenWhenTheServerEchoesThem() throws {
        // The 101 carries Set-Cookie and X-Api-Key with the API key in them.
        let server = try startHostile("echo-secrets", ["--secret", apiKey])
        for (index, arguments) in argumentSets(withUserInfo("ws", server.port)).enumerated() {
            let result = try runWspipe(arguments, stdin: .bytes(Array("hello\n".utf8)))
            assertExit(result, 0)
            assertNoSecrets(result, "success \(index)")
            assertStderr(result, contains: "wspipe: > Cookie: [redacted]")
            assertStderr(result, contains: "wspipe: > X-Api-Key: [redacted]")
            assertStderr(result, contains: "wspipe: < Set-Cookie: [redacted]")
            assertStderr(result, contains: "wspipe: < X-Api-Key: [redacted]")
            assertStderr(result, contains: index == 0 ? "Authorization: Bearer [redacted]" : "Authorization: Basic [redacted]")
            let record = try server.hostileRecord(index + 1)
            XCTAssertEqual(record.values("Cookie"), ["sid=\(cookie); theme=dark"], "the server gets the real values")
            XCTAssertEqual(record.values("X-Api-Key"), [apiKey])
            XCTAssertEqual(record.values("Authorization"),
                           [index == 0 ? "Bearer \(token)" : "Basic \(Data("alice:\(password)".utf8).base64EncodedString())"])
        }
    }

    func testRefusedConnectionShowsNoSecret() throws {
        let closed = try LoopbackSocket(listening: false)
        for (index, arguments) in argumentSets(withUserInfo("ws", closed.port)).enumerated() {
            let result = try runWspipe(arguments)
            assertExit(result, 3)
            assertNoSecrets(result, "refused \(index)")
        }
    }

    func testConnectTimeoutShowsNoSecret() throws {
        let server = try startRaw("no-answer")
        for (index, arguments) in argumentSets(withUserInfo("ws", server.port)).enumerated() {
            let result = try runWspipe(["--connect-timeout", "0.5"] + arguments, stdin: .pipe)
            assertExit(result, 3)
            assertNoSecrets(result, "timeout \(index)")
        }
    }

    func testHandshake401ShowsNoSecret() throws {
        let server = try startRaw("reject-401")
        for (index, arguments) in argumentSets(withUserInfo("ws", server.port)).enumerated() {
            let result = try runWspipe(arguments)
            assertExit(result, 5)
            assertStderr(result, contains: "401")
            assertNoSecrets(result, "401 \(index)")
        }
    }

    func testTLSFailureShowsNoSecret() throws {
        let tls = try TLSMaterial.shared()
        let server = try startEcho(["--tls", tls.serverCert, tls.serverKey])
        for (index, arguments) in argumentSets(withUserInfo("wss", server.port, host: "localhost")).enumerated() {
            let result = try runWspipe(arguments) // no --cacert: unknown CA
            assertExit(result, 4)
            assertNoSecrets(result, "TLS \(index)")
        }
    }

    func testLostConnectionAndProtocolErrorShowNoSecret() throws {
        for scenario in ["cut-frame", "invalid-utf8"] {
            let server = try startRaw(scenario)
            for (index, arguments) in argumentSets(withUserInfo("ws", server.port)).enumerated() {
                let result = finish(try spawnWspipe(arguments, stdin: .pipe), timeout: 10)
                assertExit(result, scenario == "cut-frame" ? 7 : 6)
                assertNoSecrets(result, "\(scenario) \(index)")
            }
        }
    }
}
