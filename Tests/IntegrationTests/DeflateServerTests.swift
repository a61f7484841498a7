// permessage-deflate in the server role (wspipe -l): Python websockets clients with every
// parameter combination they support, in --echo, --exec and --broadcast (one compressed
// copy for clients without server context takeover), Node's ws client, --no-deflate, the
// -v lines, and a bomb from a client (1009, memory bounded).
import Foundation
import Glibc
import TestSupport
import XCTest

final class DeflateServerTests: IntegrationTestCase {
    private func startServer(_ arguments: [String], stdin: StandardInput = .null) throws -> (ChildProcess, String) {
        let child = try spawnWspipe(["-l", "0"] + arguments, stdin: stdin)
        guard let text = child.stderr.waitForLine(startingWith: "wspipe: listening on ws://127.0.0.1:", timeout: 15),
              let port = Int(text.split(separator: ":").last?.split(separator: "/").first ?? "") else {
            XCTFail("no listening line; stderr: \(child.stderr.text)")
            throw HarnessError("server did not start")
        }
        return (child, "ws://127.0.0.1:\(port)/")
    }

    private func client(_ arguments: [String], timeout: Double = 60) throws -> RunResult {
        let child = try ChildProcess(executable: Locations.python, arguments: ["\(Locations.peers)/deflate_client.py"] + arguments,
                                     environment: Locations.baseEnvironment, stdin: .null)
        return finish(child, timeout: timeout)
    }

    /// Each combination's answer, as the 101 says it (§7.1 for each offer).
    private let answers = [
        #"{} -> permessage-deflate; server_max_window_bits=12; client_max_window_bits=12 ok"#,
        #"{"client_max_window_bits": null} -> permessage-deflate; server_max_window_bits=12 ok"#,
        #"{"client_max_window_bits": 9} -> permessage-deflate; server_max_window_bits=12; client_max_window_bits=9 ok"#,
        #"{"server_max_window_bits": 9} -> permessage-deflate; server_max_window_bits=9; client_max_window_bits=12 ok"#,
        #"{"server_max_window_bits": 15} -> permessage-deflate; server_max_window_bits=12; client_max_window_bits=12 ok"#,
        #"{"server_no_context_takeover": true} -> permessage-deflate; server_no_context_takeover; server_max_window_bits=12; client_max_window_bits=12 ok"#,
        #"{"client_no_context_takeover": true} -> permessage-deflate; client_no_context_takeover; server_max_window_bits=12; client_max_window_bits=12 ok"#,
        #"{"server_no_context_takeover": true, "client_no_context_takeover": true, "server_max_window_bits": 10, "client_max_window_bits": 10} -> permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=10; client_max_window_bits=10 ok"#,
    ]

    func testEchoWithEachPythonWebsocketsCombination() throws {
        let (server, url) = try startServer(["--echo", "-v"])
        let result = try client(["combos", url])
        XCTAssertEqual(result.stdoutText.split(separator: "\n").map(String.init), answers, result.stderr)
        server.signal(SIGTERM)
        let ended = finish(server)
        assertDiedOf(ended, SIGTERM)
        // -v: the answer and the windows, per connection.
        assertStderr(ended, contains: "* client 1: permessage-deflate agreed: permessage-deflate; server_max_window_bits=12; client_max_window_bits=12 "
                     + "(we compress with a 4096-byte window; the peer with at most 4096)")
        assertStderr(ended, contains: "* client 2: permessage-deflate agreed: permessage-deflate; server_max_window_bits=12 "
                     + "(we compress with a 4096-byte window; the peer with at most 32768)")
        assertStderr(ended, contains: "* client 8: permessage-deflate agreed: permessage-deflate; server_no_context_takeover; client_no_context_takeover; "
                     + "server_max_window_bits=10; client_max_window_bits=10 (we compress with a 1024-byte window, no context takeover; "
                     + "the peer with at most 1024, no context takeover)")
    }

    func testExecProgramPerClientWithEachCombination() throws {
        let (server, url) = try startServer(["--exec", "/bin/cat"])
        let result = try client(["combos", url, "--lines"])
        XCTAssertEqual(result.stdoutText.split(separator: "\n").map(String.init), answers, result.stderr)
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    func testServerTuningFlags() throws {
        let (server, url) = try startServer(["--echo", "--deflate-server-window-bits", "10", "--deflate-client-window-bits", "11",
                                             "--deflate-server-no-context-takeover", "--deflate-client-no-context-takeover"])
        let result = try client(["combos", url])
        let lines = result.stdoutText.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.count, answers.count, result.stderr)
        XCTAssertEqual(lines.first, #"{} -> permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=10; client_max_window_bits=11 ok"#)
        XCTAssertEqual(lines.dropFirst(3).first, #"{"server_max_window_bits": 9} -> permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=9; client_max_window_bits=11 ok"#)
        XCTAssertTrue(lines.allSatisfy { $0.hasSuffix(" ok") }, result.stdoutText)
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
        let refused = try runWspipe(["-l", "0", "--echo", "--deflate-server-window-bits", "8"])
        assertExit(refused, 2)
        assertStderr(refused, contains: "--deflate-server-window-bits with -l is our compressor's window: 9 to 15")
        let both = try runWspipe(["-l", "0", "--echo", "--no-deflate", "--deflate-client-no-context-takeover"])
        assertExit(both, 2)
        assertStderr(both, contains: "--no-deflate cannot be combined with --deflate-client-no-context-takeover")
    }

    func testNoDeflateDeclinesEveryOffer() throws {
        let (plain, plainURL) = try startServer(["--echo", "--no-deflate"])
        XCTAssertEqual(try client(["offer", plainURL]).stdoutText, "none\n")
        plain.signal(SIGTERM)
        assertDiedOf(finish(plain), SIGTERM)
        let (server, url) = try startServer(["--echo"])
        XCTAssertEqual(try client(["offer", url]).stdoutText, "permessage-deflate; server_max_window_bits=12; client_max_window_bits=12\n")
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    /// With --deflate-server-no-context-takeover every client may share a copy: one per
    /// window size (12, 9 and 10 bits among the combinations); without it, only the two
    /// clients that asked for it, each alone with its window. Every client gets every line,
    /// and so does a client without the extension (it gets the batch encoded once).
    func testBroadcastCompressesOncePerWindowForClientsWithoutContextTakeover() throws {
        let count = 200
        let lines = (0..<count).map { "line \($0) " + String(repeating: "abc", count: $0 % 50) }
        let compressible = lines.filter { $0.utf8.count >= 64 }.count
        for (flags, copies, windows) in [(["--deflate-server-no-context-takeover"], answers.count, 3), ([], 2, 2)] {
            let (server, url) = try startServer(["--broadcast", "-v"] + flags, stdin: .pipe)
            let clients = try ChildProcess(executable: Locations.python,
                                           arguments: ["\(Locations.peers)/deflate_client.py", "broadcast", url, String(count)],
                                           environment: Locations.baseEnvironment, stdin: .null)
            XCTAssertEqual(clients.stdout.waitForLine(startingWith: "ready", timeout: 30), "ready", clients.stderr.text)
            // One client per offer, and one without permessage-deflate.
            XCTAssertTrue(server.stderr.wait(timeout: 10) { String(decoding: $0, as: UTF8.self).contains("client \(self.answers.count + 1) connected") })
            server.writeStdin(lines.joined(separator: "\n") + "\n")
            let received = finish(clients, timeout: 60).stdoutText.split(separator: "\n").dropFirst()
            XCTAssertEqual(received.count, answers.count + 1)
            XCTAssertEqual(received.last, "{\"plain\": true} -> None \(count) ok")
            XCTAssertTrue(received.allSatisfy { $0.hasSuffix(" \(count) ok") }, received.joined(separator: "\n"))
            server.closeStdin()
            let result = finish(server, timeout: 30)
            assertExit(result, 0)
            assertStderr(result, contains: "permessage-deflate: \(compressible * windows) message(s) compressed once for \(compressible * copies) copies")
        }
    }

    func testNodeWsClientWithPerMessageDeflate() throws {
        let (node, ws) = try Tool.nodeWithWS()
        let (server, url) = try startServer(["--echo"])
        let script = path("client.js")
        try """
            const WebSocket = require('\(ws)');
            const messages = [];
            for (let i = 0; i < 300; i++) messages.push(JSON.stringify({ id: i, sym: 'BTC-USD', price: 1000 + (i * 7919) % 997 }));
            messages.push('y'.repeat(100000));
            const c = new WebSocket('\(url)', { perMessageDeflate: { threshold: 0, clientMaxWindowBits: true } });
            let i = 0;
            c.on('open', () => { console.log('EXT ' + c.extensions); c.send(messages[0]); });
            c.on('message', (m) => {
              if (m.toString() !== messages[i]) { console.log('DIFFERENT ' + i); process.exit(1); }
              if (++i === messages.length) { console.log('OK ' + i); c.close(1000); } else c.send(messages[i]);
            });
            c.on('close', (code) => console.log('CLOSE ' + code));
            """.write(toFile: script, atomically: true, encoding: .utf8)
        let client = try ChildProcess(executable: node, arguments: [script], environment: Locations.baseEnvironment, stdin: .null)
        let result = finish(client, timeout: 30)
        // ws shows the agreed extension's name only.
        XCTAssertEqual(result.stdoutText, "EXT permessage-deflate\nOK 301\nCLOSE 1000\n", result.stderr)
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    /// 64 MiB of zeros (about 64 KiB compressed) against --max-message-size 1M: that client
    /// is closed with 1009 and the server's memory stays small.
    func testBombFromAClientCloses1009() throws {
        let (server, url) = try startServer(["--echo", "-v", "--max-message-size", "1M"])
        let peak = sampleRSS(server)
        XCTAssertEqual(try client(["bomb", url, String(64 << 20)]).stdoutText, "closed 1009\n")
        let rss = peak()
        server.signal(SIGTERM)
        let result = finish(server)
        assertDiedOf(result, SIGTERM)
        assertStderr(result, contains: "client 1 disconnected (failed) with 1009")
        XCTAssertGreaterThan(rss, 0, "the sampler saw the process")
        XCTAssertLessThan(rss, 48 * 1024, "peak RSS \(rss) KiB")
    }
}
