// Issue 35, items 4, 7 and 8: the lines that word endings. Every ending a -v line tells is
// said in plain words, never as a Swift value ("(lost: peerClosedTCP(afterOurClose: false))");
// a refusal says why; --reconnect's gap and unused TLS options are said without -v.
import Foundation
import Glibc
import WebSocketCore
@testable import WebSocketEngine
import WebSocketTransport
import XCTest
@testable import WSPipeBridge

final class EndingWordsTests: XCTestCase {
    /// One of each kind of ending a connection can have.
    private let endings: [ConnectionEnding] = [
        .closed(ClosingHandshake(initiatedByUs: false, sent: ClosePayload(code: .normalClosure),
                                 received: ClosePayload(code: .goingAway, reason: Array("bye".utf8)))),
        .failed(.messageTooBig(size: 20, limit: 10)),
        .failed(.protocolError("a reserved opcode")),
        .lost(.peerClosedTCP(afterOurClose: false)),
        .lost(.peerClosedTCP(afterOurClose: true)),
        .lost(.readFailed(.system(errno: ECONNRESET))),
        .lost(.writeFailed(.system(errno: EPIPE))),
        .lost(.readFailed(.tlsSessionClosed)),
        .lost(.pingTimeout(seconds: 2)),
        .lost(.abandoned),
        .timedOut(CloseWait(limit: 5, waited: 5.04, closeWritten: true)),
        .timedOut(CloseWait(limit: 1, waited: 3, closeWritten: false, peerKeptSending: true)),
    ]

    /// "(" + lowerCamelCase + ":" or "(": how Swift prints an enum case with values.
    private func assertPlain(_ line: String, file: StaticString = #filePath, lineNumber: UInt = #line) {
        let dump = try! NSRegularExpression(pattern: "[a-z]+[A-Z][A-Za-z]*[:(]")
        XCTAssertNil(dump.firstMatch(in: line, range: NSRange(line.startIndex..., in: line)), line, file: file, line: lineNumber)
    }

    func testServerClientEndingsAreWorded() {
        for ending in endings { assertPlain(ClientEvent(client: 1, kind: .disconnected(ending)).line) }
        XCTAssertEqual(ClientEvent(client: 1, kind: .disconnected(.lost(.peerClosedTCP(afterOurClose: false)))).line,
                       "client 1 disconnected (lost): the client closed the TCP connection without a closing handshake")
        XCTAssertEqual(ClientEvent(client: 2, kind: .disconnected(endings[0])).line, "client 2 disconnected (closed) with 1001 (going away): bye")
        XCTAssertEqual(ClientEvent(client: 3, kind: .disconnected(.lost(.pingTimeout(seconds: 2)))).line,
                       "client 3 disconnected (ping_timeout): no pong within 2 s (--ping-timeout): the connection is dead")
        XCTAssertEqual(ClientEvent(client: 4, kind: .disconnected(endings[10])).line,
                       "client 4 disconnected (timed_out): no Close from the client: nothing came for 5 s (--close-timeout); "
                       + "gave up 5 s after the closing began")
    }

    func testForwardListenPairEndingsAreWorded() {
        for ending in endings {
            for stream: RelayStreamEnd in [.endOfStream, .failed(.system(errno: ECONNRESET)), .closedByRelay, .graceExpired] {
                let outcome = RelayOutcome(connection: ending, stream: stream, bytesToStream: 1, bytesFromStream: 2, closeSent: nil)
                assertPlain(ForwardListening.endText(outcome))
            }
        }
        let lost = RelayOutcome(connection: .lost(.peerClosedTCP(afterOurClose: false)), stream: .closedByRelay,
                                bytesToStream: 20, bytesFromStream: 10, closeSent: nil)
        XCTAssertEqual(ForwardListening.endText(lost), "WebSocket lost: the server closed the TCP connection without a closing "
                       + "handshake; the WebSocket ended first; 10 bytes sent, 20 received")
    }

    func testReconnectionDropsAreWorded() {
        let causes: [(ConnectionEvent, String)] = [
            (.disconnected(code: 1012, reason: "restart", cause: .closed, upSeconds: 3.2),
             "the server closed the connection with 1012 (service restart) \"restart\""),
            (.disconnected(code: nil, reason: nil, cause: .lost, upSeconds: 3.2), "the connection was lost without a closing handshake"),
            (.disconnected(code: 1002, reason: nil, cause: .failed, upSeconds: 3.2),
             "the server broke the protocol; wspipe closed the connection with 1002 (protocol error)"),
            (.disconnected(code: nil, reason: nil, cause: .stale, upSeconds: 3.2), "no message came for the --stale-timeout"),
            (.disconnected(code: nil, reason: nil, cause: .pingTimeout, upSeconds: 3.2), "no pong came within the --ping-timeout"),
            (.disconnected(code: nil, reason: nil, cause: .timedOut, upSeconds: 3.2), "the closing handshake timed out (--close-timeout)"),
        ]
        for (event, why) in causes {
            XCTAssertEqual(ReconnectionNotices.drop(event), "disconnected after 3.2 s: \(why); reconnecting (--reconnect)")
        }
        XCTAssertNil(ReconnectionNotices.drop(.retry(seconds: 1, attempt: 2, retryAfter: false)))
    }

    func testRefusalsSayWhy() {
        XCTAssertEqual(refusalText(status: 403, remote: "10.0.0.1:5000", reason: "origin 'http://a.example' is not allowed",
                                   origin: "http://a.example"),
                       "refused a handshake from 10.0.0.1:5000 with 403 Forbidden: origin 'http://a.example' is not allowed")
        XCTAssertEqual(refusalText(status: 401, remote: "10.0.0.1:5000", reason: "a bearer token is required", origin: "http://a.example"),
                       "refused a handshake from 10.0.0.1:5000 with 401 Unauthorized: a bearer token is required (Origin: http://a.example)")
        XCTAssertEqual(refusalText(status: 400, remote: "r", reason: nil, origin: "o\u{1B}[2J"),
                       "refused a handshake from r with 400 Bad Request (Origin: o\\x1B[2J)")
        XCTAssertEqual(refusalText(status: 200, remote: "r", reason: nil, origin: nil), "answered a plain request from r with 200")
        XCTAssertEqual(HandshakeExchange.body(of: HTTPResponse.refusalBytesOrPlain(status: 404, headers: [], body: "no WebSocket at '/x'")),
                       "no WebSocket at '/x'")
    }

    /// Which TLS options a route leaves unused: all on a ws:// route without TLS; with an
    /// https:// proxy only the server's (the proxy's TLS takes -k, --cacert, --tls-min).
    func testUnusedTLSOptionsFollowTheRoute() throws {
        let given = ["--insecure", "--cacert", "--cert", "--key", "--sni"]
        func unused(_ url: String, _ environment: [String: String] = [:], location: Bool = false) throws -> [String] {
            var config = BridgeConfiguration(url: try WebSocketURL(parsing: url))
            config.client.tlsOptionsGiven = given
            config.client.network.environment = environment
            config.client.followRedirects = location
            let (names, viaProxy) = Opener(config: config, log: Diagnostics(verbosity: -1)).unusedTLSOptions
            XCTAssertEqual(viaProxy, environment["http_proxy"]?.hasPrefix("https:") == true, url)
            return names
        }
        XCTAssertEqual(try unused("ws://h.example/"), given)
        XCTAssertEqual(try unused("ws://h.example/", ["http_proxy": "http://p.example:3128"]), given)
        XCTAssertEqual(try unused("ws://h.example/", ["http_proxy": "https://p.example:3128"]), ["--cert", "--key", "--sni"])
        XCTAssertEqual(try unused("ws+unix:///tmp/s.sock:/"), given)
        XCTAssertEqual(try unused("wss://h.example/"), [])
        XCTAssertEqual(try unused("ws://h.example/", location: true), [], "a redirect may lead to wss://")
    }
}
