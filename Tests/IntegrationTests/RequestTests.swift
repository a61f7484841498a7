import Foundation
import XCTest
import TestSupport

/// What the server sees of the opening handshake (record.py records the request).
final class RequestTests: IntegrationTestCase {
    func testCustomHeaderWithURLBeforeOrAfterOptions() throws {
        let recorder = try startRecorder()
        assertExit(try runWspipe([url(recorder), "-H", "X-Test: 1"]), 0)
        assertExit(try runWspipe(["-H", "X-Test: 2", "--header", "X-Other:  spaced value ", url(recorder)]), 0)
        assertExit(try runWspipe(["-HX-Test: 3", url(recorder)]), 0)
        XCTAssertEqual(try recorder.record(1).values("X-Test"), ["1"])
        let second = try recorder.record(2)
        XCTAssertEqual(second.values("X-Test"), ["2"])
        XCTAssertEqual(second.values("X-Other"), ["spaced value"])
        XCTAssertEqual(try recorder.record(3).values("X-Test"), ["3"])
    }

    func testSubprotocolsOfferedAndChosenOneShownWithVerbose() throws {
        let recorder = try startRecorder(["--subprotocols", "v2"])
        let result = try runWspipe(["-v", "--protocol", "chat", "--protocol", "v2", url(recorder)])
        assertExit(result, 0)
        let record = try recorder.record()
        XCTAssertEqual(record.values("Sec-WebSocket-Protocol").joined(separator: ", "), "chat, v2")
        XCTAssertEqual(record.subprotocol, "v2")
        assertStderr(result, contains: "wspipe: * subprotocol: v2")
        assertStderr(result, contains: "wspipe: > Sec-WebSocket-Protocol: chat, v2")
        assertStderrLinesPrefixed(result)
    }

    func testOriginAndUserAgent() throws {
        let recorder = try startRecorder()
        assertExit(try runWspipe(["--origin", "https://app.example", "--user-agent", "probe/1.0 (test)", url(recorder)]), 0)
        assertExit(try runWspipe([url(recorder)]), 0)
        assertExit(try runWspipe(["--user-agent", "", url(recorder)]), 0)

        let first = try recorder.record(1)
        XCTAssertEqual(first.values("Origin"), ["https://app.example"])
        XCTAssertEqual(first.values("User-Agent"), ["probe/1.0 (test)"])
        let second = try recorder.record(2)
        XCTAssertEqual(second.values("Origin"), [], "no Origin unless asked")
        XCTAssertEqual(second.values("User-Agent").count, 1)
        XCTAssertTrue(second.values("User-Agent").first?.hasPrefix("wspipe/") ?? false, "\(second.headers)")
        XCTAssertEqual(try recorder.record(3).values("User-Agent"), [], "--user-agent '' sends none")
    }

    func testBearerTokenSourcesAndPrecedence() throws {
        let recorder = try startRecorder()
        let file = path("token")
        try " \tfrom-file-token \r\n".write(toFile: file, atomically: false, encoding: .utf8)
        let environment = ["WSPIPE_BEARER": "from-env-token"]

        assertExit(try runWspipe([url(recorder)], environment: environment), 0)
        assertExit(try runWspipe(["--bearer-file", file, url(recorder)], environment: environment), 0)
        assertExit(try runWspipe(["--bearer", "from-flag-token", "--bearer-file", file, url(recorder)],
                                 environment: environment), 0)
        assertExit(try runWspipe([url(recorder)]), 0)

        XCTAssertEqual(try recorder.record(1).values("Authorization"), ["Bearer from-env-token"], "env alone")
        XCTAssertEqual(try recorder.record(2).values("Authorization"), ["Bearer from-file-token"], "file beats env; trimmed")
        XCTAssertEqual(try recorder.record(3).values("Authorization"), ["Bearer from-flag-token"], "flag beats file and env")
        XCTAssertEqual(try recorder.record(4).values("Authorization"), [], "no token, no header")
    }

    func testBearerFileWrittenByEchoWithTrailingNewline() throws {
        // Regression test (fixed): `echo token > file` is refused. Expected: the token is trimmed ("trimmed" in
        // DESIGN.md) and sent as 'Authorization: Bearer from-file-token', exit 0. Actual:
        // exit 2, "--bearer-file '...': the bearer token contains spaces, control or
        // non-ASCII characters". CommandLine.swift trims with a Character set built from
        // " \t\r\n", where "\r\n" is ONE grapheme, so a lone "\n" is never trimmed
        // ("\r\n" endings and no newline at all work).
        // Repro: echo tok > /tmp/t; wspipe --bearer-file /tmp/t ws://127.0.0.1:9/; echo $?
        let recorder = try startRecorder()
        let file = path("token")
        try "from-file-token\n".write(toFile: file, atomically: false, encoding: .utf8)
        let result = try runWspipe(["--bearer-file", file, url(recorder)])
        assertExit(result, 0)
        if result.exitCode == 0 {
            XCTAssertEqual(try recorder.record(1).values("Authorization"), ["Bearer from-file-token"])
        }
    }

    func testBasicAuthFromURLUserInfoIsPercentDecoded() throws {
        let recorder = try startRecorder()
        let result = try runWspipe(["ws://user:pa%40ss@127.0.0.1:\(recorder.port)/"])
        assertExit(result, 0)
        let authorization = try recorder.record().values("Authorization")
        XCTAssertEqual(authorization.count, 1, "\(authorization)")
        let encoded = authorization.first.map { String($0.dropFirst("Basic ".count)) } ?? ""
        XCTAssertTrue(authorization.first?.hasPrefix("Basic ") ?? false)
        XCTAssertEqual(Data(base64Encoded: encoded).map { String(decoding: $0, as: UTF8.self) }, "user:pa@ss")
        XCTAssertEqual(try recorder.record().values("Host"), ["127.0.0.1:\(recorder.port)"], "no user info in Host")
    }

    func testPathAndQueryAreSentByteForByte() throws {
        let recorder = try startRecorder()
        let targets = ["/a/b%20c/;p=1/~x.y_z-?q=1&r=%2F&s=a:b@c,d!$'()*+=&empty=&&",
                       "/",
                       "/only/path/",
                       "/?just=query"]
        for target in targets {
            assertExit(try runWspipe([url(recorder, target)]), 0)
        }
        assertExit(try runWspipe(["ws://127.0.0.1:\(recorder.port)?no=slash"]), 0)
        assertExit(try runWspipe(["ws://127.0.0.1:\(recorder.port)"]), 0)
        for (index, target) in (targets + ["/?no=slash", "/"]).enumerated() {
            XCTAssertEqual(try recorder.record(index + 1).path, target)
        }
    }

    func testHostHeaderOptionReplacesTheDefault() throws {
        let recorder = try startRecorder()
        assertExit(try runWspipe(["-H", "Host: example.test", url(recorder)]), 0)
        assertExit(try runWspipe([url(recorder)]), 0)
        XCTAssertEqual(try recorder.record(1).values("Host"), ["example.test"])
        XCTAssertEqual(try recorder.record(2).values("Host"), ["127.0.0.1:\(recorder.port)"])
    }

    func testHeaderOptionsReplaceGeneratedHeadersAndAddSubprotocols() throws {
        let recorder = try startRecorder(["--subprotocols", "b"])
        assertExit(try runWspipe(["-H", "Authorization: Custom abc", "--bearer", "tok", "-H", "Origin: http://h.example",
                                  "--origin", "http://o.example", "-H", "User-Agent: mine/2",
                                  "-H", "Sec-WebSocket-Protocol: a, b", url(recorder)]), 0)
        let plain = try startRecorder() // requires no subprotocol
        assertExit(try runWspipe(["--bearer", "tok", "ws://u:p@127.0.0.1:\(plain.port)/"]), 0)
        let first = try recorder.record(1)
        XCTAssertEqual(first.values("Authorization"), ["Custom abc"], "-H Authorization replaces the bearer")
        XCTAssertEqual(first.values("Origin"), ["http://h.example"], "-H Origin replaces --origin")
        XCTAssertEqual(first.values("User-Agent"), ["mine/2"])
        XCTAssertEqual(first.values("Sec-WebSocket-Protocol").joined(separator: ", "), "a, b")
        XCTAssertEqual(first.subprotocol, "b")
        XCTAssertEqual(try plain.record(1).values("Authorization"), ["Bearer tok"],
                       "one Authorization header: the bearer token wins over URL user info")
    }

    func testHeaderInjectionIsRefusedBeforeConnecting() throws {
        let listener = try LoopbackSocket(listening: true)
        let target = "ws://127.0.0.1:\(listener.port)/"
        let attempts: [[String]] = [
            ["-H", "X: a\r\nEvil: 1", target],
            ["-H", "X: a\nEvil: 1", target],
            ["-H", "Bad Name: 1", target],
            ["--origin", "https://a.example\r\nEvil: 1", target],
            ["--user-agent", "ua\r\nEvil: 1", target],
            ["--bearer", "tok\r\nEvil: 1", target],
            ["-H", "Upgrade: h2c", target],
            ["-H", "Sec-WebSocket-Key: AAAAAAAAAAAAAAAAAAAAAA==", target],
        ]
        for arguments in attempts {
            let result = try runWspipe(arguments)
            assertExit(result, 2)
            XCTAssertTrue(result.stderr.hasPrefix("wspipe: "), "\(arguments): \(result)")
            XCTAssertEqual(result.stdout, [])
            XCTAssertFalse(listener.hasPendingConnection, "\(arguments) connected to the server")
        }
    }
}
