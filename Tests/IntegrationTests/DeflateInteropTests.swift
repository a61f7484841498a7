// permessage-deflate against independent peers: Python websockets (every parameter
// combination it supports as a server) and Node's ws, both ways, -v and --stats checked; a
// bomb from a real server; hand-built frames for the §6 rules and data that does not inflate.
import Foundation
import XCTest
import TestSupport

final class DeflateInteropTests: IntegrationTestCase {
    /// Varied JSON lines, compressible as real feeds are.
    private var feed: String {
        (0..<500).map { #"{"id":\#($0),"price":\#(1000 + ($0 * 7919) % 997).25,"sym":"BTC-USD","side":"\#($0 % 3 == 0 ? "buy" : "sell")"}"# }
            .joined(separator: "\n") + "\n"
    }

    func testEchoThroughPythonWebsocketsWithEachParameterCombination() throws {
        let combinations = [
            "{}",
            #"{"server_no_context_takeover": true}"#,
            #"{"client_no_context_takeover": true}"#,
            #"{"server_max_window_bits": 9}"#,
            #"{"server_max_window_bits": 12, "server_no_context_takeover": true, "client_no_context_takeover": true}"#,
        ]
        for parameters in combinations {
            let server = try startEcho(["--deflate", parameters])
            let result = try runWspipe(["-v", "--stats", url(server)], stdin: .bytes(Array(feed.utf8)))
            assertExit(result, 0)
            XCTAssertEqual(result.stdoutText, feed, parameters)
            XCTAssertTrue(result.stderr.contains("* permessage-deflate agreed: permessage-deflate"), result.stderr)
            XCTAssertTrue(result.stderr.contains("* permessage-deflate: received 500 messages"), result.stderr)
            XCTAssertTrue(result.stderr.contains(#""compression":{"received":{"messages":500,"#), result.stderr)
        }
    }

    func testClientOffersMatchPythonWebsocketsRequirements() throws {
        // The server asks for client_max_window_bits: we must have offered it.
        let server = try startEcho(["--deflate", #"{"client_max_window_bits": 10}"#])
        let result = try runWspipe(["-v", "--deflate-client-window-bits", "12", "--deflate-server-window-bits", "11",
                                    "--deflate-client-no-context-takeover", url(server)], stdin: .bytes(Array(feed.utf8)))
        assertExit(result, 0)
        XCTAssertEqual(result.stdoutText, feed)
        XCTAssertTrue(result.stderr.contains("> Sec-WebSocket-Extensions: permessage-deflate; client_no_context_takeover; server_max_window_bits=11; client_max_window_bits=12"), result.stderr)
        // The default offer, which Python websockets answers with its window choice.
        let chooser = try startEcho(["--deflate", #"{"client_max_window_bits": 11}"#])
        let chosen = try runWspipe(["-v", url(chooser)], stdin: .bytes(Array(feed.utf8)))
        assertExit(chosen, 0)
        XCTAssertEqual(chosen.stdoutText, feed)
        XCTAssertTrue(chosen.stderr.contains("> Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\n"), chosen.stderr)
        XCTAssertTrue(chosen.stderr.contains("we compress with a 2048-byte window"), chosen.stderr)
        XCTAssertTrue(result.stderr.contains("client_max_window_bits=10"), result.stderr)
    }

    func testNoDeflateOffersNothing() throws {
        let server = try startEcho(["--deflate", "{}"])
        let result = try runWspipe(["-v", "--stats", "--no-deflate", url(server)], stdin: .bytes(Array(feed.utf8)))
        assertExit(result, 0)
        XCTAssertEqual(result.stdoutText, feed)
        XCTAssertFalse(result.stderr.contains("Sec-WebSocket-Extensions"), result.stderr)
        XCTAssertTrue(result.stderr.contains(#""compression":null"#), result.stderr)
    }

    /// 64 MiB of zeros from websockets (about 64 KiB on the wire) against a 1 MiB limit:
    /// 1009, exit 6, and wspipe's memory stays small.
    /// --max-message-size limits the message, not its compressed form: 1000 random bytes
    /// compress to about 1,006 (Python websockets compresses them anyway), which failed a
    /// 1000-byte limit with "a message of at least 1006 B exceeds the limit" (exit 6).
    func testMaxMessageSizeLimitsTheMessageNotItsCompressedForm() throws {
        let server = try startEcho(["--library-defaults"])
        let message = randomBytes(1000)
        let result = try runWspipe(["-b", "--whole-input", "--max-message-size", "1000", url(server)], stdin: .bytes(message))
        assertExit(result, 0)
        XCTAssertEqual(result.stdout, message, result.stderr)
        let over = try runWspipe(["-b", "--whole-input", "--max-message-size", "999", url(server)], stdin: .bytes(message))
        XCTAssertEqual(over.exitCode, 6, over.stderr)
    }

    func testDecompressionBombFromARealServerCloses1009() throws {
        let server = try startEcho(["--deflate", "{}", "--greet-zeros", String(64 << 20)])
        let child = try spawnWspipe(["-b", "--max-message-size", "1M", url(server)], stdin: .pipe)
        // VmHWM sampled while it runs: wait4's ru_maxrss would also count the test runner's
        // own size at spawn time (see `sampleRSS`), which grows over a full run.
        let peak = sampleRSS(child)
        let result = finish(child, timeout: 30)
        let rss = peak()
        assertExit(result, 6)
        XCTAssertTrue(result.stderr.contains("exceeds the limit of 1 MiB"), result.stderr)
        XCTAssertEqual(result.stdout.count, 0)
        // Far below the 64 MiB the bomb inflates to (a debug build's baseline is ~13-30 MiB;
        // the release binary measured 10.0 MiB against 9.0 MiB for a plain session).
        XCTAssertGreaterThan(rss, 0, "the sampler saw the process")
        XCTAssertLessThan(rss, 48 * 1024, "peak RSS \(rss) KiB")
    }

    private let agreed = Array("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n".utf8)

    private func assertFails(_ frames: [UInt8], code: Int, says text: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let server = try startScripted(agreed + frames)
        let result = finish(try spawnWspipe([url(server)], stdin: .pipe), timeout: 10, file: file, line: line)
        assertExit(result, 6, file: file, line: line)
        XCTAssertTrue(result.stderr.contains(text), result.stderr, file: file, line: line)
        XCTAssertEqual(try server.record().close?.code, code, file: file, line: line)
    }

    func testSection6RulesAndBadData() throws {
        // "Hello" compressed (§7.2.3.1) then an uncompressed message: both fine.
        let hello = Wire.frame(0x1, [0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00], rsv: 4)
        let server = try startScripted(agreed + hello + Wire.text("plain") + Wire.close(1000), then: "close")
        let result = finish(try spawnWspipe([url(server)], stdin: .pipe), timeout: 10)
        assertExit(result, 0)
        assertStdout(result, "Hello\nplain\n")
        // RSV1 on a control frame and on a continuation: 1002.
        try assertFails(Wire.frame(0x9, [], rsv: 4), code: 1002, says: "RSV")
        try assertFails(Wire.frame(0x1, [0xf2, 0x48], fin: false, rsv: 4) + Wire.frame(0x0, [0xcd, 0xc9, 0xc9, 0x07, 0x00], rsv: 4),
                        code: 1002, says: "RSV")
        // Data that does not inflate: 1007.
        try assertFails(Wire.frame(0x2, [0xff, 0xff, 0xff, 0xff, 0xff], rsv: 4), code: 1007, says: "does not inflate")
        // Inflated text that is not UTF-8: 1007.
        try assertFails(Wire.frame(0x1, [0x72, 0xfc, 0xef, 0x04, 0x00], rsv: 4), code: 1007, says: "UTF-8")
    }

    func testResponseWeCannotAcceptFailsTheHandshakeNamingTheParameter() throws {
        let bad = Array("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Extensions: permessage-deflate; server_max_window_bits=16\r\n\r\n".utf8)
        let server = try startScripted(bad)
        let result = finish(try spawnWspipe([url(server)], stdin: .pipe), timeout: 10)
        assertExit(result, 5)
        XCTAssertTrue(result.stderr.contains("server_max_window_bits=\"16\""), result.stderr)
        // A parameter we did not offer (with the window flag giving a value, above it).
        let above = Array(String(decoding: bad, as: UTF8.self).replacingOccurrences(of: "server_max_window_bits=16", with: "client_max_window_bits=13").utf8)
        let server2 = try startScripted(above)
        let result2 = finish(try spawnWspipe(["--deflate-client-window-bits", "12", url(server2)], stdin: .pipe), timeout: 10)
        assertExit(result2, 5)
        XCTAssertTrue(result2.stderr.contains("client_max_window_bits=\"13\""), result2.stderr)
    }

    func testWithNoDeflateAnAgreedDeflateIsRefusedAsBefore() throws {
        let server = try startScripted(agreed)
        let result = finish(try spawnWspipe(["--no-deflate", url(server)], stdin: .pipe), timeout: 10)
        assertExit(result, 5)
        XCTAssertTrue(result.stderr.contains("permessage-deflate"), result.stderr)
    }

    func testDecompressInflatesBinaryPayloadsAndNamesOneThatDoesNot() throws {
        let gz: [UInt8] = [0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xf3, 0x48, 0xcd, 0xc9, 0xc9, 0x07,
                           0x00, 0x82, 0x89, 0xd1, 0xf7, 0x05, 0x00, 0x00, 0x00]
        let good = try startScripted(Wire.switching + Wire.frame(0x2, gz) + Wire.text("plain") + Wire.close(1000), then: "close")
        let result = finish(try spawnWspipe(["--decompress", "gzip", url(good)], stdin: .pipe), timeout: 10)
        assertExit(result, 0)
        assertStdout(result, "Hello\nplain\n")
        let bad = try startScripted(Wire.switching + Wire.frame(0x2, gz) + Wire.frame(0x2, [1, 2, 3]))
        let failed = finish(try spawnWspipe(["--decompress", "gzip", url(bad)], stdin: .pipe), timeout: 10)
        assertExit(failed, 1)
        assertStdout(failed, "Hello\n")
        XCTAssertTrue(failed.stderr.contains("message 2 does not inflate as gzip"), failed.stderr)
        XCTAssertEqual(try bad.record().close?.code, 1003)
    }

    func testEchoThroughNodeWs() throws {
        let (node, ws) = try Tool.nodeWithWS()
        let script = path("echo.js")
        try """
            const { WebSocketServer } = require('\(ws)');
            const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: { threshold: 0 } });
            wss.on('listening', () => console.log('PORT ' + wss.address().port));
            wss.on('connection', (s) => s.on('message', (m, binary) => s.send(m, { binary })));
            """.write(toFile: script, atomically: true, encoding: .utf8)
        let server = try startPeer(executable: node, arguments: [script])
        let result = try runWspipe(["-v", url(server)], stdin: .bytes(Array(feed.utf8)))
        assertExit(result, 0)
        XCTAssertEqual(result.stdoutText, feed)
        XCTAssertTrue(result.stderr.contains("< Sec-WebSocket-Extensions: permessage-deflate"), result.stderr)
        XCTAssertTrue(result.stderr.contains("received 500 messages"), result.stderr)
    }
}
