// wspipe -l --forward / --forward-tokens (the gateway): real clients (Python websockets,
// Node ws) through the gateway to real TCP and Unix targets (peers/forward.py).
import Foundation
import Glibc
import TestSupport
import XCTest

final class ForwardTests: IntegrationTestCase {
    var script: String { Locations.peers + "/forward.py" }

    /// A target of peers/forward.py (it prints its port).
    func target(_ mode: String, _ arguments: [String] = []) throws -> Peer {
        try startPython("forward.py", [mode] + arguments)
    }

    /// A client of peers/forward.py, run to its end; its stdout lines.
    func client(_ mode: String, _ arguments: [String], environment: [String: String] = [:], timeout: Double = 60,
                file: StaticString = #filePath, line: UInt = #line) throws -> [String] {
        let child = try ChildProcess(executable: Locations.python, arguments: [script, mode] + arguments,
                                     environment: Locations.baseEnvironment.merging(environment) { $1 }, stdin: .null)
        let result = finish(child, timeout: timeout, file: file, line: line)
        XCTAssertEqual(result.termination, .exited(0), "\(result)", file: file, line: line)
        return result.stdoutText.split(separator: "\n").map(String.init)
    }

    func gateway(_ arguments: [String], scheme: String = "ws") throws -> (ChildProcess, Int) {
        try startListening(["-v"] + arguments, scheme: scheme)
    }

    /// Ends the gateway with SIGTERM; its stderr.
    func stop(_ gateway: ChildProcess) -> String {
        gateway.signal(SIGTERM)
        let result = finish(gateway)
        assertDiedOf(result, SIGTERM)
        return result.stderr
    }

    func testPythonClientThroughTheGatewayToAnEchoBothWays() throws {
        let echo = try target("echo")
        let (gateway, port) = try self.gateway(["--forward", "tcp:127.0.0.1:\(echo.port)"])
        let lines = try client("echoclient", ["ws://127.0.0.1:\(port)/", "\(4 << 20)", "binary"])
        XCTAssertEqual(lines, ["subprotocol binary", "ECHO same \(4 << 20)", "closed 1000"])
        XCTAssertEqual(try client("echoclient", ["ws://127.0.0.1:\(port)/", "1000"]), ["subprotocol None", "ECHO same 1000", "closed 1000"],
                       "no subprotocol when none is offered")
        let stderr = stop(gateway)
        XCTAssertTrue(stderr.contains("client 1: forwarding to tcp:127.0.0.1:\(echo.port)"), stderr)
        XCTAssertTrue(stderr.contains("client 1: tcp:127.0.0.1:\(echo.port): \(4 << 20) bytes to the target, \(4 << 20) from it"), stderr)
    }

    func testNodeWsClientThroughTheGateway() throws {
        let (node, ws) = try Tool.nodeWithWS()
        let echo = try target("echo")
        let (gateway, port) = try self.gateway(["--forward", "tcp:127.0.0.1:\(echo.port)"])
        let program = path("client.js")
        try """
        const WebSocket = require('\(ws)');
        const crypto = require('crypto');
        const data = crypto.randomBytes(1 << 20);
        const socket = new WebSocket('ws://127.0.0.1:\(port)/', ['binary']);
        let got = [];
        let size = 0;
        socket.on('open', () => { for (let i = 0; i < data.length; i += 50000) socket.send(data.subarray(i, i + 50000)); });
        socket.on('message', (m) => {
          got.push(m); size += m.length;
          if (size >= data.length) { console.log('protocol ' + socket.protocol); console.log(Buffer.concat(got).equals(data) ? 'same' : 'DIFFERENT'); socket.close(1000); }
        });
        const timer = setTimeout(() => { console.log('timeout'); process.exit(1); }, 30000);
        socket.on('close', (code) => { console.log('closed ' + code); clearTimeout(timer); });
        """.write(toFile: program, atomically: true, encoding: .utf8)
        let child = try ChildProcess(executable: node, arguments: [program], environment: Locations.baseEnvironment, stdin: .null)
        let result = finish(child, timeout: 40)
        XCTAssertEqual(result.stdoutText, "protocol binary\nsame\nclosed 1000\n", "\(result)")
        _ = stop(gateway)
    }

    /// A sink: every byte the client sent, in order (its SHA-256), then the client's Close
    /// gives the target EOF.
    func testEveryByteReachesASink() throws {
        let sink = try target("sink")
        let (gateway, port) = try self.gateway(["--forward", "tcp:127.0.0.1:\(sink.port)"])
        let lines = try client("send", ["ws://127.0.0.1:\(port)/", "\(8 << 20)"])
        let sent = try XCTUnwrap(lines.first?.split(separator: " ").last.map(String.init))
        XCTAssertEqual(lines.first?.hasPrefix("closed 1000 "), true, "\(lines)")
        XCTAssertNotNil(sink.process.stdout.waitForLine(startingWith: "SINK \(8 << 20) \(sent)", timeout: 20), sink.process.stdout.text)
        _ = stop(gateway)
    }

    /// The target's EOF with data in flight: every byte before it, then Close 1000.
    func testTargetEndOfStreamWithDataInFlightArrivesWholeThen1000() throws {
        let burst = try target("burst", ["\(5 << 20)"])
        let (gateway, port) = try self.gateway(["--forward", "tcp:127.0.0.1:\(burst.port)"])
        let lines = try client("recv", ["ws://127.0.0.1:\(port)/", "\(5 << 20)"])
        XCTAssertEqual(lines.count, 2, "\(lines)")
        XCTAssertTrue(lines.first?.hasPrefix("RECV \(5 << 20) ") == true && lines.first?.hasSuffix(" 1000") == true, "\(lines)")
        XCTAssertEqual(lines.last, "PATTERN same")
        let stderr = stop(gateway)
        XCTAssertTrue(stderr.contains("the target ended its stream"), stderr)
    }

    func testTargetResetIs1014AfterTheBytesBeforeIt() throws {
        let reset = try target("reset")
        let (gateway, port) = try self.gateway(["--forward", "tcp:127.0.0.1:\(reset.port)"])
        let lines = try client("recv", ["ws://127.0.0.1:\(port)/"])
        let hello = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        XCTAssertEqual(lines, ["RECV 5 \(hello) 1014"])
        let stderr = stop(gateway)
        XCTAssertTrue(stderr.contains("the target reset the connection"), stderr)
    }

    /// A target that half-closes: its last bytes, then Close 1000; it still gets EOF from us.
    func testAHalfClosingTargetGetsItsBytesOutThen1000() throws {
        let half = try target("halfclose")
        let (gateway, port) = try self.gateway(["--forward", "tcp:127.0.0.1:\(half.port)"])
        let lines = try client("recv", ["ws://127.0.0.1:\(port)/"])
        XCTAssertEqual(lines.first?.hasPrefix("RECV 3 "), true, "\(lines)")
        XCTAssertEqual(lines.first?.hasSuffix(" 1000"), true, "\(lines)")
        XCTAssertNotNil(half.process.stdout.waitForLine(startingWith: "HALF 0", timeout: 10), "the target is closed after the client left")
        _ = stop(gateway)
    }

    func testARefusingTargetIs502AndOneThatDoesNotAnswer504() throws {
        let bound = try LoopbackSocket(listening: false)
        let (gateway, port) = try self.gateway(["--forward", "tcp:127.0.0.1:\(bound.port)"])
        XCTAssertEqual(try client("status", ["ws://127.0.0.1:\(port)/"]), ["status 502"])
        let stderr = stop(gateway)
        XCTAssertTrue(stderr.contains("cannot connect to 127.0.0.1:\(bound.port): Connection refused"), stderr)

        // A listener whose backlog is full drops the SYN: the dial waits, the client gets 504.
        let full = try FullBacklog()
        let (slow, slowPort) = try self.gateway(["--forward", "tcp:127.0.0.1:\(full.port)", "--handshake-timeout", "2"])
        let start = monotonicSeconds()
        XCTAssertEqual(try client("status", ["ws://127.0.0.1:\(slowPort)/"]), ["status 504"])
        XCTAssertLessThan(monotonicSeconds() - start, 10)
        XCTAssertTrue(stop(slow).contains("did not answer within 1.5s"))
    }

    /// A target that stops reading: the client's sends stop (flow control), the gateway's
    /// memory stays within its bound.
    func testATargetThatStopsReadingStopsTheClientAndTheGatewayStaysSmall() throws {
        let stall = try target("stall")
        let (gateway, port) = try self.gateway(["--forward", "tcp:127.0.0.1:\(stall.port)"])
        let before = rssKiB(gateway.pid)
        let lines = try client("flood", ["ws://127.0.0.1:\(port)/", "3"])
        let sent = Int(lines.first?.split(separator: " ").last ?? "") ?? -1
        XCTAssertGreaterThan(sent, 0, "\(lines)")
        XCTAssertLessThan(sent, 40 << 20, "the client was stopped: \(lines)")
        let after = rssKiB(gateway.pid)
        XCTAssertLessThan(after - before, 16 * 1024, "RSS \(before) KiB -> \(after) KiB")
        _ = stop(gateway)
    }

    /// 1,000 clients at once, each through to the echo and closed: the gateway's
    /// descriptors come back to what they were.
    func testAThousandConnectionsAtOnceGiveBackEveryDescriptor() throws {
        let echo = try target("echo")
        let (gateway, port) = try self.gateway(["--forward", "tcp:127.0.0.1:\(echo.port)"])
        let before = descriptors(gateway.pid)
        XCTAssertEqual(try client("many", ["ws://127.0.0.1:\(port)/", "1000"], timeout: 120), ["MANY 1000 0"])
        let deadline = monotonicSeconds() + 15
        while descriptors(gateway.pid) != before && monotonicSeconds() < deadline { usleep(50_000) }
        XCTAssertEqual(descriptors(gateway.pid), before)
        _ = stop(gateway)
    }

    func testOriginIsRefusedUnlessAllowed() throws {
        let echo = try target("echo")
        let (gateway, port) = try self.gateway(["--forward", "tcp:127.0.0.1:\(echo.port)"])
        XCTAssertEqual(try client("status", ["ws://127.0.0.1:\(port)/", "https://evil.example"]), ["status 403"])
        XCTAssertEqual(try client("status", ["ws://127.0.0.1:\(port)/"]), ["status 101 None"], "no Origin: a CLI client")
        XCTAssertEqual(try client("status", ["ws://127.0.0.1:\(port)/", "-", "base64"]), ["status 400"])
        _ = stop(gateway)
        let (allowing, allowingPort) = try self.gateway(["--forward", "tcp:127.0.0.1:\(echo.port)", "--allow-origin", "https://console.example"])
        XCTAssertEqual(try client("status", ["ws://127.0.0.1:\(allowingPort)/", "https://console.example", "binary"]), ["status 101 binary"])
        XCTAssertEqual(try client("status", ["ws://127.0.0.1:\(allowingPort)/", "https://evil.example"]), ["status 403"])
        _ = stop(allowing)
    }

    func testAUnixSocketTarget() throws {
        let socketPath = path("target.sock")
        _ = try target("--unix", [socketPath, "echo"])
        let (gateway, port) = try self.gateway(["--forward", "unix:\(socketPath)"])
        XCTAssertEqual(try client("echoclient", ["ws://127.0.0.1:\(port)/", "300000"]), ["subprotocol None", "ECHO same 300000", "closed 1000"])
        _ = stop(gateway)
    }

    func testTLSInFront() throws {
        let tls = try TLSMaterial.shared()
        let echo = try target("echo")
        let (gateway, port) = try self.gateway(["--cert", tls.serverCert, "--key", tls.serverKey, "--forward", "tcp:127.0.0.1:\(echo.port)"],
                                               scheme: "wss")
        XCTAssertEqual(try client("echoclient", ["wss://localhost:\(port)/", "500000", "binary"], environment: ["FORWARD_CA": tls.caCert]),
                       ["subprotocol binary", "ECHO same 500000", "closed 1000"])
        _ = stop(gateway)
    }

    /// --idle-timeout and --max-clients apply per client as in the other modes; --jsonl
    /// gives one forwarded object per client.
    func testIdleTimeoutMaxClientsAndTheJSONLinesEvent() throws {
        let echo = try target("echo")
        let (gateway, port) = try startListening(["--jsonl", "--idle-timeout", "0.5", "--max-clients", "1",
                                                  "--forward", "tcp:127.0.0.1:\(echo.port)"])
        let holder = try ChildProcess(executable: Locations.python, arguments: [script, "hold", "ws://127.0.0.1:\(port)/"],
                                      environment: Locations.baseEnvironment, stdin: .null)
        XCTAssertNotNil(holder.stdout.waitForLine(startingWith: "held", timeout: 15), holder.stderr.text)
        XCTAssertEqual(try client("status", ["ws://127.0.0.1:\(port)/"]), ["status 503"], "one client at most")
        let line = try XCTUnwrap(holder.stdout.waitForLine(startingWith: "closed", timeout: 15))
        XCTAssertTrue(line.hasPrefix("closed 1000 after "), line)
        let after = Double(line.split(separator: " ").last ?? "") ?? -1
        XCTAssertGreaterThanOrEqual(after, 0.4, line)
        XCTAssertLessThan(after, 5, line)
        XCTAssertTrue(waitForStdout(gateway, contains: #"{"type":"forwarded","client":1,"target":"tcp:127.0.0.1:\#(echo.port)","to_target":0,"from_target":0,"target_end":"closed"}"#),
                      "the idle timeout closed the client, then the relay closed the target")
        _ = stop(gateway)
        _ = finish(holder)
    }

    /// A page in headless Chromium (peers/browser.py), served by the gateway itself
    /// (--static), opens a WebSocket through it to the echo (--sameorigin admits the page's
    /// Origin): binary bytes come back as they went, text comes back as its UTF-8 bytes.
    /// Fails without --sameorigin (the page's WebSocket gets 403).
    func testABrowserPageThroughTheGatewayToAnEcho() throws {
        let echo = try target("echo")
        let site = path("site")
        try FileManager.default.createDirectory(atPath: site, withIntermediateDirectories: true)
        try "<!doctype html><title>gateway</title>".write(toFile: site + "/index.html", atomically: true, encoding: .utf8)
        let (gateway, port) = try self.gateway(["--forward", "tcp:127.0.0.1:\(echo.port)", "--static", site, "--sameorigin"])
        let open = "const ws = new WebSocket('ws://' + location.host + '/', ['binary']); ws.binaryType = 'arraybuffer';"
            + " ws.onerror = () => no(new Error('WebSocket error')); setTimeout(() => no(new Error('timeout')), 15000);"
        let values = try browse("http://127.0.0.1:\(port)/", [
            "new Promise((ok, no) => { \(open) ws.onopen = () => ws.send(new Uint8Array([1, 2, 3, 250]));"
                + " ws.onmessage = (e) => { ok(ws.protocol + ' ' + Array.from(new Uint8Array(e.data)).join(',')); ws.close(1000); }; })",
            "new Promise((ok, no) => { \(open) ws.onopen = () => ws.send('h\u{e9}llo');"
                + " ws.onmessage = (e) => { ok(new TextDecoder().decode(e.data)); ws.close(1000); }; })",
        ])
        XCTAssertEqual(values.map { $0 as? String }, ["binary 1,2,3,250", "h\u{e9}llo"], "\(values)")
        let stderr = stop(gateway)
        XCTAssertTrue(stderr.contains("client 2: tcp:127.0.0.1:\(echo.port): 6 bytes to the target, 6 from it"), stderr)
    }

    // MARK: The token file

    func writeTokens(_ text: String, mode: mode_t = 0o600) throws -> String {
        let file = path("tokens.conf")
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        chmod(file, mode)
        return file
    }

    func testTokensChooseTheTargetAndTheFileIsReadAgainWhenItChanges() throws {
        let echo = try target("echo"), burst = try target("burst", ["10"])
        let file = try writeTokens("# targets\nsecret-a: 127.0.0.1:\(echo.port)\n\n")
        let (gateway, port) = try self.gateway(["--forward-tokens", file])
        XCTAssertEqual(try client("echoclient", ["ws://127.0.0.1:\(port)/?token=secret-a", "1000"]),
                       ["subprotocol None", "ECHO same 1000", "closed 1000"])
        XCTAssertEqual(try client("status", ["ws://127.0.0.1:\(port)/?token=nope"]), ["status 404"])
        XCTAssertEqual(try client("status", ["ws://127.0.0.1:\(port)/"]), ["status 404"])

        // A new token: the file is read again at the next client (its size changed).
        _ = try writeTokens("secret-a: 127.0.0.1:\(echo.port)\nsecret-b: tcp:127.0.0.1:\(burst.port)\n")
        XCTAssertEqual(try client("recv", ["ws://127.0.0.1:\(port)/?token=secret-b", "10"]).last, "PATTERN same")

        // A broken file keeps the last good table and says where it is broken.
        _ = try writeTokens("secret-a: 127.0.0.1:\(echo.port)\nsecret-b is broken\n")
        XCTAssertEqual(try client("recv", ["ws://127.0.0.1:\(port)/?token=secret-b", "10"]).last, "PATTERN same")
        let stderr = stop(gateway)
        XCTAssertTrue(stderr.contains("wspipe: warning: \(file):2: expected 'TOKEN: HOST:PORT'; keeping the last good table"), stderr)
        XCTAssertFalse(stderr.contains("secret-"), "tokens never appear in -v lines: \(stderr)")
    }

    func testAGroupWritableTokenFileIsRefusedAtStart() throws {
        let file = try writeTokens("a: 127.0.0.1:1\n", mode: 0o664)
        let result = try runWspipe(["-l", "127.0.0.1:0", "--forward-tokens", file])
        assertExit(result, 2)
        XCTAssertTrue(result.stderr.contains("is writable by its group (mode 664)"), result.stderr)
        XCTAssertFalse(result.stderr.contains("listening on"), result.stderr)
        let bad = try writeTokens("a 127.0.0.1:1\n")
        let broken = try runWspipe(["-l", "127.0.0.1:0", "--forward-tokens", bad])
        assertExit(broken, 2)
        assertStderr(broken, contains: "\(bad):1: expected 'TOKEN: HOST:PORT'")
    }

    // MARK: Helpers

    func descriptors(_ pid: pid_t) -> Int {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []).count
    }

    func rssKiB(_ pid: pid_t) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return 0 }
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }
}
