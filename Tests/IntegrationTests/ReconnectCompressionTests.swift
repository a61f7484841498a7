// --reconnect against servers left at their defaults, which compress: Python websockets,
// Node ws with perMessageDeflate, wspipe -l --echo; over ws:// and wss://; in text, --jsonl
// and -b. The reconnecting runner built its cores without the agreed extensions, so the
// first compressed message failed the connection (1002, exit 6) on every one of them.
import Foundation
import TestSupport
import XCTest

final class ReconnectCompressionTests: IntegrationTestCase {
    /// Long enough that every server compresses it (Node ws: 1 KiB threshold by default).
    private let line = String(repeating: "x", count: 2000)

    private enum Format: CaseIterable {
        case text, jsonl, binary
        var arguments: [String] {
            switch self {
            case .text: []
            case .jsonl: ["--jsonl"]
            case .binary: ["-b"]
            }
        }
    }

    /// Runs `wspipe --reconnect` with one message in each format against `url`; each run
    /// must get its message back and exit 0.
    private func checkEveryFormat(_ url: String, tls: [String] = [], peer: String,
                                  file: StaticString = #filePath, line callLine: UInt = #line) throws {
        for format in Format.allCases {
            let input: String
            switch format {
            case .text, .binary: input = line + "\n"
            case .jsonl: input = #"{"type":"text","data":"\#(line)"}"# + "\n"
            }
            let result = try runWspipe(["--reconnect"] + tls + format.arguments + [url], stdin: .bytes(Array(input.utf8)))
            let context = "\(peer), \(format), \(url): \(result.stderr)"
            XCTAssertEqual(result.exitCode, 0, context, file: file, line: callLine)
            switch format {
            case .text, .binary:
                XCTAssertEqual(result.stdoutText, input, context, file: file, line: callLine)
            case .jsonl:
                XCTAssertTrue(result.stdoutText.contains(line), "\(context)\n\(result.stdoutText)", file: file, line: callLine)
            }
            XCTAssertFalse(result.stderr.contains("RSV"), context, file: file, line: callLine)
        }
    }

    func testPythonWebsocketsAtItsDefaults() throws {
        let server = try startEcho(["--library-defaults"])
        try checkEveryFormat(url(server), peer: "websockets")
        let tls = try TLSMaterial.shared()
        let secure = try startEcho(["--library-defaults", "--tls", tls.serverCert, tls.serverKey])
        try checkEveryFormat(url(secure, scheme: "wss", host: "localhost"), tls: ["--cacert", tls.caCert], peer: "websockets")
    }

    func testNodeWsWithPerMessageDeflate() throws {
        let (node, ws) = try Tool.nodeWithWS()
        let script = path("echo.js")
        try """
            const { WebSocketServer } = require('\(ws)');
            const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: true });
            wss.on('listening', () => console.log('PORT ' + wss.address().port));
            wss.on('connection', (s) => s.on('message', (m, binary) => s.send(m, { binary })));
            """.write(toFile: script, atomically: true, encoding: .utf8)
        let server = try startPeer(executable: node, arguments: [script])
        try checkEveryFormat(url(server), peer: "node ws")
    }

    func testWspipeEchoServer() throws {
        let (_, port) = try startListening(["--echo"])
        try checkEveryFormat("ws://127.0.0.1:\(port)/", peer: "wspipe -l --echo")
        let tls = try TLSMaterial.shared()
        let (_, securePort) = try startListening(["--echo", "--cert", tls.serverCert, "--key", tls.serverKey], scheme: "wss")
        try checkEveryFormat("wss://localhost:\(securePort)/", tls: ["--cacert", tls.caCert], peer: "wspipe -l --echo")
    }
}
