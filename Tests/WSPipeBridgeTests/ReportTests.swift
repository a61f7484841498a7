// report(_:): every failure's one line and exit status, worded only here.
@testable import WebSocketCore
import WebSocketTransport
import XCTest
import WebSocketEngine
@testable import WSPipeBridge

final class ReportTests: XCTestCase {
    private func head(_ status: Int, _ reason: String, _ headers: [HTTPHeader] = []) -> HTTPResponseHead {
        HTTPResponseHead(version: "HTTP/1.1", statusCode: status, reason: reason, headers: headers)
    }

    func testRetryAfterIsInTheOneLineMessage() {
        for (status, reason) in [(503, "Service Unavailable"), (429, "Too Many Requests")] {
            let refused = head(status, reason, [HTTPHeader(name: "Retry-After", value: "30")])
            let (message, exit) = report(.open(.handshake(.unexpectedStatus(refused), body: [])))
            XCTAssertEqual(message, "the server answered \(status) \(reason) (Retry-After: 30) instead of 101 Switching Protocols")
            XCTAssertEqual(exit, .handshakeRejected)
        }
        let plain = report(.open(.handshake(.unexpectedStatus(head(403, "Forbidden")), body: Array("no".utf8)))).message
        XCTAssertEqual(plain, "the server answered 403 Forbidden instead of 101 Switching Protocols; body: \"no\"")
    }

    func testOnlyUsageErrorsPointAtHelp() {
        let failures: [Failure] = [
            .open(.transport(.connect(target: "127.0.0.1:9", errno: ECONNREFUSED))),
            .open(.transport(.tls(.trustStore(path: "/x/ca.pem", reason: "no such file")))),
            .open(.transport(.timedOut(.connecting(target: "h:1"), seconds: 10))),
            .open(.redirect(.tooMany(limit: 5))),
            .timedOutBeforeOpen(seconds: 2), .lost(.peerClosedTCP(afterOurClose: false)),
            .closeTimedOut(CloseWait(limit: 5, waited: 5.2, closeWritten: true)), .local(call: "eventfd", errno: EMFILE),
            .addressInUse(address: "0.0.0.0:80"), .cannotListen(address: "0.0.0.0:80", errno: EACCES),
            .serverTLS(.certificateFile(path: "c.pem", reason: "no start line")), .missingProgram(path: "/bin/x", errno: ENOENT),
        ]
        for failure in failures {
            let text = report(failure).message ?? ""
            XCTAssertFalse(text.contains("--help"), text)
            XCTAssertFalse(text.isEmpty)
        }
        XCTAssertEqual(report(.usage("bad", pointsAtHelp: true)).message, "bad (see wspipe --help)")
    }

    func testStatuses() {
        XCTAssertEqual(report(.open(.transport(.connect(target: "h", errno: ECONNREFUSED)))).status, .cannotConnect)
        XCTAssertEqual(report(.open(.transport(.tls(.wrongPassphrase(path: "k"))))).status, .tlsFailure)
        XCTAssertEqual(report(.open(.transport(.unixPathLength(path: "p", limit: 107)))).status, .usage)
        XCTAssertEqual(report(.open(.handshakeLost(.closedMidAnswer))).status, .handshakeRejected)
        XCTAssertEqual(report(.signal(15)).status, .terminated)
        XCTAssertNil(report(.signal(2)).message)
        XCTAssertEqual(report(.addressInUse(address: "a")).status, .cannotConnect)
        XCTAssertEqual(report(.serverTLS(.wrongPassphrase(path: "k"))).status, .tlsFailure)
        XCTAssertEqual(report(.missingProgram(path: "p", errno: ENOENT)).status, .localError)
    }

    func testTimeoutsNameTheirLimit() {
        XCTAssertEqual(report(.open(.transport(.timedOut(.resolving(host: "h"), seconds: 2.5)))).message,
                       "timed out after 2.5 s resolving 'h' (--connect-timeout)")
        XCTAssertEqual(report(.timedOutBeforeOpen(seconds: 1)).message,
                       "timed out after 1 s (--timeout) before the connection was open")
    }

    func testProxySourcesAreNamedOnlyHere() {
        let proxy = ProxyURL(kind: .http, host: "127.0.0.1", port: 3128)
        let option = ProxyHop(proxy: proxy, source: .option)
        XCTAssertEqual(report(.open(.transport(.connect(target: "127.0.0.1:3128", errno: ECONNREFUSED, via: option)))).message,
                       "cannot connect to the HTTP proxy 127.0.0.1:3128 (from --proxy): Connection refused")
        let variable = ProxyHop(proxy: proxy, source: .variable("https_proxy"))
        XCTAssertEqual(report(.open(.transport(.timedOut(.connectingToProxy(variable), seconds: 1)))).message,
                       "timed out after 1 s connecting to the HTTP proxy 127.0.0.1:3128 (from https_proxy)",
                       "no second parenthetical after the stage's own")
    }
}
