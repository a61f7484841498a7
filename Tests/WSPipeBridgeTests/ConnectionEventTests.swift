import WebSocketCore
import WebSocketEngine
import XCTest
@testable import WSPipeBridge

/// The EVENTS schema of the man page, byte for byte.
final class ConnectionEventTests: XCTestCase {
    func testJSONSchema() {
        let cases: [(ConnectionEvent, String)] = [
            (.connecting(url: "ws://h/", attempt: 1), #"{"type":"connecting","url":"ws://h/","attempt":1}"#),
            (.connected(url: "ws://h/", subprotocol: "v2", attempt: 2),
             #"{"type":"connected","url":"ws://h/","subprotocol":"v2","attempt":2}"#),
            (.connected(url: "ws://h/", subprotocol: nil, attempt: 1),
             #"{"type":"connected","url":"ws://h/","subprotocol":null,"attempt":1}"#),
            (.disconnected(code: 1012, reason: "restart \"now\"", cause: .closed, upSeconds: 1.23456),
             #"{"type":"disconnected","code":1012,"reason":"restart \"now\"","cause":"closed","up_s":1.235}"#),
            (.disconnected(code: nil, reason: nil, cause: .pingTimeout, upSeconds: 3),
             #"{"type":"disconnected","code":null,"reason":null,"cause":"ping_timeout","up_s":3.0}"#),
            (.retry(seconds: 0.25, attempt: 3, retryAfter: false), #"{"type":"retry","in_s":0.25,"attempt":3,"retry_after":false}"#),
            (.resubscribed(messages: 2), #"{"type":"resubscribed","messages":2}"#),
            (.expectFailed(Conversation.Miss(step: "--expect #2", pattern: "a\"b", why: .timedOut(10)), lastMessage: Array("x".utf8)),
             #"{"type":"expect_failed","step":"--expect #2","pattern":"a\"b","reason":"timeout","code":null,"last":"x"}"#),
            (.expectFailed(Conversation.Miss(step: "--expect-json #1", pattern: "id=1", why: .closed(code: 1001)), lastMessage: nil),
             #"{"type":"expect_failed","step":"--expect-json #1","pattern":"id=1","reason":"closed","code":1001,"last":null}"#),
            (.dropped(count: 7), #"{"type":"dropped","count":7}"#),
            (.givingUp(attempts: 4, exit: 3), #"{"type":"giving_up","attempts":4,"exit":3}"#),
        ]
        for (event, json) in cases { XCTAssertEqual(String(decoding: event.json, as: UTF8.self), json) }
    }

    func testEveryEventTypeIsIgnoredAsInput() {
        let events: [ConnectionEvent] = [
            .connecting(url: "u", attempt: 1), .connected(url: "u", subprotocol: nil, attempt: 1),
            .disconnected(code: nil, reason: nil, cause: .lost, upSeconds: 0), .retry(seconds: 1, attempt: 2, retryAfter: true),
            .resubscribed(messages: 1), .expectFailed(Conversation.Miss(step: "--expect #1", pattern: "p", why: .timedOut(1)), lastMessage: nil),
            .dropped(count: 1), .givingUp(attempts: 1, exit: 3),
        ]
        for event in events {
            let text = String(decoding: event.json, as: UTF8.self)
            let type = text.split(separator: "\"")[3]
            XCTAssertTrue(ConnectionEvent.types.contains(String(type)), text)
        }
        XCTAssertEqual(ConnectionEvent.types.count, events.count)
    }

    func testOpenErrorsMapToTheRetryTable() {
        XCTAssertEqual(ReconnectingRunner.attemptFailure(.transport(.connect(target: "h:1", errno: ECONNREFUSED))), .connectFailed)
        XCTAssertEqual(ReconnectingRunner.attemptFailure(.transport(.timedOut(.awaitingHandshakeResponse, seconds: 1))), .connectFailed)
        XCTAssertEqual(ReconnectingRunner.attemptFailure(.transport(.resolve(host: "h", reason: "Name or service not known"))),
                       .connectRefusedForGood)
        XCTAssertEqual(ReconnectingRunner.attemptFailure(.handshakeLost(.closedMidAnswer)), .handshakeLost)
    }
}
