import WebSocketCore
@testable import WebSocketEngine
import WebSocketTransport
import XCTest

/// The metrics' text (fixed names, HELP and TYPE, the close-code labels), the answers at the
/// metrics path, and which listeners are loopback: pure, no sockets.
final class MetricsExpositionTests: XCTestCase {
    func testEveryFamilyHasHelpAndTypeAndCloseCodesOutsideTheRangeAreOther() {
        var metrics = MetricsExposition()
        metrics.totals.closes = [1000: 2, 1015: 1, 4001: 1, 3000: 2, 999: 1]
        metrics.handshakes = [404: 1, 101: 3]
        metrics.httpRequests = [304: 2, 200: 5]
        metrics.startTime = 1_700_000_000.0625
        let lines = metrics.text.split(separator: "\n").map(String.init)
        let names = ["wspipe_clients_connected", "wspipe_handshakes_total", "wspipe_http_requests_total", "wspipe_messages_received_total",
                     "wspipe_messages_sent_total", "wspipe_bytes_received_total", "wspipe_bytes_sent_total",
                     "wspipe_closes_total", "wspipe_children_running", "wspipe_deflate_bytes_in_total",
                     "wspipe_deflate_bytes_out_total", "wspipe_start_time_seconds"]
        XCTAssertEqual(lines.filter { $0.hasPrefix("# TYPE ") }.map { String($0.split(separator: " ")[2]) }, names)
        XCTAssertEqual(lines.filter { $0.hasPrefix("# HELP ") }.count, names.count)
        XCTAssertTrue(lines.contains(#"wspipe_closes_total{code="1000"} 2"#))
        XCTAssertTrue(lines.contains(#"wspipe_closes_total{code="1015"} 1"#))
        XCTAssertTrue(lines.contains(#"wspipe_closes_total{code="other"} 4"#), "\(lines)")
        XCTAssertEqual(lines.filter { $0.hasPrefix("wspipe_handshakes_total{") },
                       [#"wspipe_handshakes_total{status="101"} 3"#, #"wspipe_handshakes_total{status="404"} 1"#])
        XCTAssertEqual(lines.filter { $0.hasPrefix("wspipe_http_requests_total{") },
                       [#"wspipe_http_requests_total{status="200"} 5"#, #"wspipe_http_requests_total{status="304"} 2"#])
        XCTAssertTrue(lines.contains("wspipe_children_running 0"))
        XCTAssertTrue(lines.contains("wspipe_start_time_seconds 1700000000.062"))
    }

    private func head(_ method: String, _ target: String, _ headers: [HTTPHeader] = []) -> HTTPRequestHead {
        HTTPRequestHead(method: method, target: target, version: "HTTP/1.1", headers: [HTTPHeader(name: "Host", value: "h")] + headers)
    }

    private func answer(_ policy: HandshakePolicy, _ head: HTTPRequestHead) -> String? {
        policy.metricsAnswer(head, text: { "m 1\n" }).map { String(decoding: $0, as: UTF8.self) }
    }

    func testTheMetricsPathAnswersGetAndHeadRefusesOtherMethodsAndWantsTheToken() throws {
        var policy = HandshakePolicy()
        XCTAssertNil(answer(policy, head("GET", "/metrics")), "no path: the handshake's own answer")
        policy.metricsPath = "/metrics"
        let get = try XCTUnwrap(answer(policy, head("GET", "/metrics?x")))
        XCTAssertTrue(get.hasPrefix("HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: 4\r\n"), get)
        XCTAssertTrue(get.hasSuffix("\r\n\r\nm 1\n"), get)
        XCTAssertTrue(try XCTUnwrap(answer(policy, head("HEAD", "/metrics"))).hasSuffix("Content-Length: 4\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"))
        let post = try XCTUnwrap(answer(policy, head("POST", "/metrics")))
        XCTAssertTrue(post.hasPrefix("HTTP/1.1 405 ") && post.contains("Allow: GET, HEAD\r\n"), post)
        XCTAssertNil(answer(policy, head("GET", "/metricsx")))
        policy.bearerToken = "s3cret"
        XCTAssertTrue(try XCTUnwrap(answer(policy, head("GET", "/metrics"))).hasPrefix("HTTP/1.1 401 "))
        XCTAssertTrue(try XCTUnwrap(answer(policy, head("GET", "/metrics", [HTTPHeader(name: "Authorization", value: "Bearer s3cret")])))
            .hasPrefix("HTTP/1.1 200 "))
    }

    func testLoopbackListeners() throws {
        for text in ["8080", "127.0.0.1:1", "127.1.2.3:1", "[::1]:1", "unix:/tmp/x.sock"] {
            XCTAssertTrue(try ListenAddress(parsing: text).isLoopback, text)
        }
        for text in ["0.0.0.0:1", "192.168.1.2:1", "[::]:1", "[fe80::1]:1"] {
            XCTAssertFalse(try ListenAddress(parsing: text).isLoopback, text)
        }
    }
}
