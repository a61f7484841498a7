// Starting `wspipe -l 0 ...` for the server tests: the port comes from its one
// `listening on` line (ws:// or, with --cert, wss://).
import TestSupport
import XCTest

extension IntegrationTestCase {
    /// Spawns `wspipe -l 0 ARGUMENTS` and waits for `listening on SCHEME://127.0.0.1:PORT/`.
    func startListening(_ arguments: [String], scheme: String = "ws", environment: [String: String] = [:],
                        file: StaticString = #filePath, line: UInt = #line) throws -> (ChildProcess, Int) {
        let child = try spawnWspipe(["-l", "0"] + arguments, stdin: .null, environment: environment)
        guard let text = child.stderr.waitForLine(startingWith: "wspipe: listening on \(scheme)://127.0.0.1:", timeout: 15),
              let port = Int(text.split(separator: ":").last?.split(separator: "/").first ?? "") else {
            XCTFail("no \(scheme):// listening line; stderr: \(child.stderr.text)", file: file, line: line)
            throw HarnessError("server did not start")
        }
        return (child, port)
    }
}
