// --metrics PATH: the Prometheus text on the server's own listener, read by
// prometheus_client's parser (peers/metrics.py), with values checked against what the
// clients did; the non-loopback rule, the bearer token, other methods, the path without it.
import Foundation
import Glibc
import TestSupport
import XCTest

final class MetricsTests: IntegrationTestCase {
    private func metrics(_ arguments: [String]) throws -> RunResult {
        let child = try ChildProcess(executable: Locations.python, arguments: ["\(Locations.peers)/metrics.py"] + arguments,
                                     environment: Locations.baseEnvironment, stdin: .null)
        return finish(child, timeout: 30)
    }

    /// /m scraped every 50 ms until it shows `line` (5 s at most); the last scrape.
    private func scrape(_ port: Int, until line: String) throws -> String {
        var seen = ""
        for _ in 0..<100 {
            seen = try metrics(["scrape", "http://127.0.0.1:\(port)/m"]).stdoutText
            if seen.contains(line) { break }
            usleep(50_000)
        }
        return seen
    }

    private func raw(_ port: Int, _ request: String) throws -> String {
        let file = path("request-\(UUID().uuidString)")
        try Data(request.utf8).write(to: URL(fileURLWithPath: file))
        let child = try ChildProcess(executable: Locations.python, arguments: ["\(Locations.peers)/server_client.py", "request", String(port), file],
                                     environment: Locations.baseEnvironment, stdin: .null)
        return finish(child, timeout: 30).stdoutText
    }

    func testEchoTrafficIsCountedAsTheClientsDidIt() throws {
        let before = Date().timeIntervalSince1970
        let (server, port) = try startListening(["--echo", "--path", "/ws/", "--metrics", "/metrics"])
        let result = try metrics(["traffic", "ws://127.0.0.1:\(port)/ws/", "http://127.0.0.1:\(port)/metrics"])
        var lines = result.stdoutText.split(separator: "\n").map(String.init)
        let start = try XCTUnwrap(lines.first { $0.hasPrefix("wspipe_start_time_seconds{} ") }, result.stdoutText + result.stderr)
        let started = try XCTUnwrap(Double(start.split(separator: " ")[1]))
        XCTAssertTrue(started >= before - 1 && started <= Date().timeIntervalSince1970, start)
        lines.removeAll { $0 == start }
        // Scrapes before the last (until the three connections had ended) are 200s.
        let scrapes = try XCTUnwrap(lines.last.flatMap { Int($0.dropFirst("scrapes ".count)) }, result.stdoutText)
        let earlierScrapes = scrapes > 1 ? ["wspipe_handshakes_total{status=200} \(scrapes - 1)"] : []
        // websockets compresses every message (permessage-deflate is agreed): 30 x 3 small
        // frames in; ours go out as they are (under 64 bytes).
        let expected = ["family wspipe_bytes_received counter", "family wspipe_bytes_sent counter",
                        "family wspipe_children_running gauge", "family wspipe_clients_connected gauge",
                        "family wspipe_closes counter", "family wspipe_deflate_bytes_in counter",
                        "family wspipe_deflate_bytes_out counter", "family wspipe_handshakes counter",
                        "family wspipe_http_requests counter", "family wspipe_messages_received counter", "family wspipe_messages_sent counter",
                        "family wspipe_start_time_seconds gauge",
                        "wspipe_bytes_received_total{} 540", "wspipe_bytes_sent_total{} 540",
                        "wspipe_children_running{} 0", "wspipe_clients_connected{} 0",
                        "wspipe_closes_total{code=1000} 2", "wspipe_closes_total{code=other} 1",
                        "wspipe_deflate_bytes_out_total{} 0",
                        "wspipe_handshakes_total{status=101} 3"] + earlierScrapes
                     + ["wspipe_handshakes_total{status=404} 1", "wspipe_handshakes_total{status=426} 1",
                        "wspipe_messages_received_total{} 90", "wspipe_messages_sent_total{} 90", "scrapes \(scrapes)"]
        let deflateIn = lines.first { $0.hasPrefix("wspipe_deflate_bytes_in_total{} ") }
        lines.removeAll { $0 == deflateIn }
        XCTAssertEqual(lines, expected, result.stderr)
        let compressed = try XCTUnwrap(deflateIn.flatMap { Int($0.split(separator: " ")[1]) })
        XCTAssertTrue(compressed > 90 * 2 && compressed < 540 * 2, "compressed bytes in: \(compressed)")

        let scrape = try metrics(["scrape", "http://127.0.0.1:\(port)/metrics?x=1"])
        XCTAssertTrue(scrape.stdoutText.hasPrefix("status 200\ncontent-type text/plain; version=0.0.4; charset=utf-8\n"), scrape.stdoutText)
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    func testCompressedMessagesCountTheirPayloadAndTheirWireBytesApart() throws {
        let (server, port) = try startListening(["--echo", "--metrics", "/m"])
        let line = String(repeating: "abcd", count: 250)
        assertStdout(try runWspipe(["ws://127.0.0.1:\(port)/"], stdin: .bytes(Array((line + "\n").utf8))), line + "\n")
        let seen = try scrape(port, until: "wspipe_clients_connected{} 0\n")
        XCTAssertTrue(seen.contains("wspipe_bytes_received_total{} 1000\n") && seen.contains("wspipe_bytes_sent_total{} 1000\n"), seen)
        let wire = seen.split(separator: "\n").filter { $0.hasPrefix("wspipe_deflate_bytes_") }.compactMap { Int($0.split(separator: " ")[1]) }
        XCTAssertEqual(wire.count, 2, seen)
        XCTAssertTrue(wire.allSatisfy { $0 > 0 && $0 < 100 }, "both ways compressed: \(wire)")
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    func testChildrenRunningAndTheOtherModes() throws {
        let (exec, port) = try startListening(["--sh", "cat", "--metrics", "/m"])
        let holder = try spawnWspipe(["ws://127.0.0.1:\(port)/"], stdin: .pipe)
        let seen = try scrape(port, until: "wspipe_children_running{} 1\n")
        XCTAssertTrue(seen.contains("wspipe_children_running{} 1\n") && seen.contains("wspipe_clients_connected{} 1\n"), seen)
        holder.closeStdin()
        _ = finish(holder)
        exec.signal(SIGTERM)
        assertDiedOf(finish(exec), SIGTERM)

        // Standard input open: --broadcast and the stdio mode serve until it ends.
        for mode in [["--broadcast"], []] {
            let server = try spawnWspipe(["-l", "0"] + mode + ["--metrics", "/m"], stdin: .pipe)
            let line = try XCTUnwrap(server.stderr.waitForLine(startingWith: "wspipe: listening on ws://127.0.0.1:", timeout: 15))
            let port = try XCTUnwrap(Int(line.split(separator: ":").last?.split(separator: "/").first ?? ""))
            let idle = try metrics(["scrape", "http://127.0.0.1:\(port)/m"]).stdoutText
            XCTAssertTrue(idle.contains("wspipe_clients_connected{} 0\n") && idle.contains("wspipe_messages_sent_total{} 0\n"),
                          "\(mode): \(idle)")
            if mode == ["--broadcast"] {
                // To a client without deflate a broadcast goes as frames encoded once for all: counted too.
                let client = try spawnWspipe(["--receive-only", "--no-deflate", "-n", "1", "ws://127.0.0.1:\(port)/"], stdin: .null)
                _ = try scrape(port, until: "wspipe_clients_connected{} 1\n")
                server.writeStdin("hello\n")
                assertStdout(finish(client), "hello\n")
                let sent = try scrape(port, until: "wspipe_clients_connected{} 0\n")
                XCTAssertTrue(sent.contains("wspipe_messages_sent_total{} 1\n") && sent.contains("wspipe_bytes_sent_total{} 5\n")
                              && sent.contains("wspipe_closes_total{code=1000} 1\n"), sent)
            }
            server.signal(SIGTERM)
            assertDiedOf(finish(server), SIGTERM)
        }
    }

    /// --static's answers count by status in wspipe_http_requests_total (the scrape itself not).
    func testStaticAnswersAreCountedByStatus() throws {
        let root = path("www")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        try Data("hello\n".utf8).write(to: URL(fileURLWithPath: root + "/a.txt"))
        let (server, port) = try startListening(["--echo", "--static", root, "--metrics", "/m"])
        let none = try metrics(["scrape", "http://127.0.0.1:\(port)/m"]).stdoutText
        XCTAssertTrue(none.contains("family wspipe_http_requests counter\n") && !none.contains("wspipe_http_requests_total{"), none)
        for target in ["/a.txt", "/a.txt", "/missing", "/a.txt/"] {
            _ = try raw(port, "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        }
        _ = try raw(port, "POST /a.txt HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        let seen = try scrape(port, until: "wspipe_http_requests_total{status=405} 1\n")
        XCTAssertTrue(seen.contains("wspipe_http_requests_total{status=200} 2\n") && seen.contains("wspipe_http_requests_total{status=404} 2\n")
                      && seen.contains("wspipe_http_requests_total{status=405} 1\n"), seen)
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    func testNonLoopbackListenersNeedTheBearerTokenOrMetricsPublic() throws {
        let refused = try runWspipe(["-l", "0.0.0.0:0", "--echo", "--metrics", "/metrics"])
        assertExit(refused, 2)
        XCTAssertTrue(refused.stderr.hasPrefix("wspipe: --metrics on 0.0.0.0:0, which is not a loopback address, needs --require-bearer (which then covers it) or --metrics-public "),
                      refused.stderr)
        let alone = try runWspipe(["-l", "0", "--echo", "--metrics-public"])
        assertExit(alone, 2)
        XCTAssertTrue(alone.stderr.hasPrefix("wspipe: --metrics-public needs --metrics PATH "), alone.stderr)
        let shared = try runWspipe(["-l", "0", "--echo", "--metrics", "/h", "--health", "/h"])
        assertExit(shared, 2)
        XCTAssertTrue(shared.stderr.hasPrefix("wspipe: --metrics and --health cannot share the path '/h' "), shared.stderr)

        for extra in [["--metrics-public"], ["--require-bearer"]] {
            let server = try spawnWspipe(["-l", "0.0.0.0:0", "--echo", "--metrics", "/metrics"] + extra, stdin: .null,
                                         environment: ["WSPIPE_BEARER": "s3cret"])
            XCTAssertNotNil(server.stderr.waitForLine(startingWith: "wspipe: listening on ws://0.0.0.0:", timeout: 15), server.stderr.text)
            server.signal(SIGTERM)
            assertDiedOf(finish(server), SIGTERM)
        }
    }

    func testTheBearerTokenCoversThePathAndOtherMethodsAreRefused() throws {
        let (server, port) = try startListening(["--echo", "--require-bearer", "--metrics", "/metrics"],
                                                environment: ["WSPIPE_BEARER": "s3cret"])
        XCTAssertTrue(try metrics(["scrape", "http://127.0.0.1:\(port)/metrics"]).stdoutText.hasPrefix("status 401\n"))
        XCTAssertTrue(try metrics(["scrape", "http://127.0.0.1:\(port)/metrics", "guess"]).stdoutText.hasPrefix("status 401\n"))
        let good = try metrics(["scrape", "http://127.0.0.1:\(port)/metrics", "s3cret"]).stdoutText
        XCTAssertTrue(good.hasPrefix("status 200\n") && good.contains("wspipe_handshakes_total{status=401} 2\n"), good)
        let auth = "Authorization: Bearer s3cret\r\n"
        let head = try raw(port, "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\(auth)\r\n")
        XCTAssertTrue(head.hasPrefix("status 200\n") && head.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8\n")
                      && head.hasSuffix("\nbody \n"), head)
        let post = try raw(port, "POST /metrics HTTP/1.1\r\nHost: x\r\n\(auth)Content-Length: 0\r\n\r\n")
        XCTAssertTrue(post.hasPrefix("status 405\n") && post.contains("Allow: GET, HEAD\n"), post)
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)

        // Without --metrics the path is any other: a plain GET gets 426, a GET off --path too.
        let (plain, plainPort) = try startListening(["--echo", "--path", "/ws"])
        XCTAssertTrue(try raw(plainPort, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").hasPrefix("status 426\n"))
        plain.signal(SIGTERM)
        assertDiedOf(finish(plain), SIGTERM)
    }
}
