import WebSocketCore
@testable import WebSocketEngine
import XCTest

/// HandshakeRoute (pure): where a request head goes, without sockets.
final class HandshakeRouteTests: XCTestCase {
    private let room = HandshakeRoute.Load(clients: 0, maximumClients: 10)

    private func upgradeHead(_ target: String = "/", _ headers: [(String, String)] = []) -> HTTPRequestHead {
        HTTPRequestHead(method: "GET", target: target, version: "HTTP/1.1", headers: [
            HTTPHeader(name: "Host", value: "h"), HTTPHeader(name: "Upgrade", value: "websocket"),
            HTTPHeader(name: "Connection", value: "Upgrade"), HTTPHeader(name: "Sec-WebSocket-Key", value: "dGhlIHNhbXBsZSBub25jZQ=="),
            HTTPHeader(name: "Sec-WebSocket-Version", value: "13")] + headers.map { HTTPHeader(name: $0.0, value: $0.1) })
    }

    private func plainGet(_ target: String, method: String = "GET") -> HTTPRequestHead {
        HTTPRequestHead(method: method, target: target, version: "HTTP/1.1", headers: [HTTPHeader(name: "Host", value: "h")])
    }

    /// A short name for the decision, with the status of a refusal or an answer.
    private func shown(_ decision: HandshakeRoute.Decision) -> String {
        switch decision {
        case .metrics: return "metrics"
        case .answer(let bytes): return "answer \(HandshakeExchange.status(of: bytes))"
        case .site(let otherwise): return "site else \(HandshakeExchange.status(of: otherwise))"
        case .refuse(let bytes): return "refuse \(HandshakeExchange.status(of: bytes))"
        case .limited(let reason, let bytes): return "limited \(reason) \(HandshakeExchange.status(of: bytes))"
        case .upgrade(_, let subprotocol): return "upgrade \(subprotocol ?? "-")"
        case .review(_, let subprotocol): return "review \(subprotocol ?? "-")"
        }
    }

    private func headerValue(_ name: String, _ decision: HandshakeRoute.Decision) -> String? {
        let bytes: [UInt8]
        switch decision {
        case .refuse(let refusal), .limited(_, let refusal): bytes = refusal
        default: return nil
        }
        let text = String(decoding: bytes, as: UTF8.self)
        return text.split(separator: "\r\n").first { $0.lowercased().hasPrefix(name.lowercased() + ":") }
            .map { String($0.dropFirst(name.count + 1).drop { $0 == " " }) }
    }

    func testPlainRequestsGoToMetricsHealthThenSite() {
        var policy = HandshakePolicy()
        policy.metricsPath = "/metrics"
        policy.healthPath = "/health"
        let route = HandshakeRoute(policy: policy, hasSite: true)
        XCTAssertEqual(shown(route.route(plainGet("/metrics"), peer: .unlimited, load: room)), "metrics")
        XCTAssertEqual(shown(route.route(plainGet("/health"), peer: .unlimited, load: room)), "answer 200")
        XCTAssertEqual(shown(route.route(plainGet("/index.html"), peer: .unlimited, load: room)), "site else 426")
        XCTAssertEqual(shown(route.route(plainGet("/x", method: "POST"), peer: .unlimited, load: room)), "site else 405")
        let bare = HandshakeRoute(policy: HandshakePolicy(), hasSite: false)
        XCTAssertEqual(shown(bare.route(plainGet("/index.html"), peer: .unlimited, load: room)), "refuse 426", "no site: the handshake's own refusal")
        XCTAssertEqual(shown(bare.route(plainGet("/metrics"), peer: .unlimited, load: room)), "refuse 426", "no metrics path")
    }

    func testAPlainGetIsNeverRefusedForClients() {
        let full = HandshakeRoute.Load(clients: 10, maximumClients: 10)
        var policy = HandshakePolicy()
        policy.healthPath = "/health"
        let route = HandshakeRoute(policy: policy, hasSite: false)
        XCTAssertEqual(shown(route.route(plainGet("/health"), peer: .unlimited, load: full)), "answer 200")
        let crowded = HandshakeRoute.Standing(clients: 3, maximumClients: 3)
        XCTAssertEqual(shown(route.route(plainGet("/health"), peer: crowded, load: room)), "answer 200")
    }

    func testTotalsGive503AndTheAddressGives429() {
        let route = HandshakeRoute(policy: HandshakePolicy(), hasSite: false)
        let full = HandshakeRoute.Load(clients: 10, maximumClients: 10)
        let decision = route.route(upgradeHead(), peer: .unlimited, load: full)
        XCTAssertEqual(shown(decision), "refuse 503")
        XCTAssertEqual(headerValue("Retry-After", decision), "1")
        let crowded = HandshakeRoute.Standing(clients: 3, maximumClients: 3)
        let perAddress = route.route(upgradeHead(), peer: crowded, load: room)
        XCTAssertEqual(shown(perAddress), "limited clients 429")
        XCTAssertEqual(headerValue("Retry-After", perAddress), "1")
        XCTAssertEqual(shown(route.route(upgradeHead(), peer: HandshakeRoute.Standing(clients: 2, maximumClients: 3), load: room)), "upgrade -")
        XCTAssertEqual(shown(route.route(upgradeHead(), peer: crowded, load: full)), "refuse 503", "the totals come first")
    }

    func testTheHandshakeRateRefusesPlainRequestsToo() {
        var policy = HandshakePolicy()
        policy.healthPath = "/health"
        let route = HandshakeRoute(policy: policy, hasSite: true)
        let limited = HandshakeRoute.Standing(handshakeRetryAfter: 3)
        for head in [upgradeHead(), plainGet("/health"), plainGet("/index.html")] {
            let decision = route.route(head, peer: limited, load: room)
            XCTAssertEqual(shown(decision), "limited requests 429", head.target)
            XCTAssertEqual(headerValue("Retry-After", decision), "3")
        }
    }

    func testPolicyThenModeThenReview() {
        var policy = HandshakePolicy()
        policy.path = "/ws"
        policy.subprotocols = ["v1"]
        var route = HandshakeRoute(policy: policy, hasSite: false)
        XCTAssertEqual(shown(route.route(upgradeHead("/other"), peer: .unlimited, load: room)), "refuse 404")
        XCTAssertEqual(shown(route.route(upgradeHead("/ws", [("Sec-WebSocket-Protocol", "v1")]), peer: .unlimited, load: room)), "upgrade v1")
        route.modeRefusal = { $0.path == "/ws" ? ModeRefusal(status: 503, body: "busy") : nil }
        XCTAssertEqual(shown(route.route(upgradeHead("/ws"), peer: .unlimited, load: room)), "refuse 503")
        route.modeRefusal = { _ in nil }
        route.decidesLater = true
        XCTAssertEqual(shown(route.route(upgradeHead("/ws", [("Sec-WebSocket-Protocol", "v1")]), peer: .unlimited, load: room)), "review v1")
        XCTAssertEqual(shown(route.route(upgradeHead("/other"), peer: .unlimited, load: room)), "refuse 404", "the policy refuses before review")
    }

    func testAnInvalidUpgradeIsRefusedAsBefore() {
        let route = HandshakeRoute(policy: HandshakePolicy(), hasSite: true)
        let head = HTTPRequestHead(method: "GET", target: "/", version: "HTTP/1.1", headers: [
            HTTPHeader(name: "Host", value: "h"), HTTPHeader(name: "Upgrade", value: "websocket"),
            HTTPHeader(name: "Connection", value: "Upgrade"), HTTPHeader(name: "Sec-WebSocket-Version", value: "13")])
        XCTAssertEqual(shown(route.route(head, peer: .unlimited, load: room)), "refuse 400", "a missing key is no plain request")
    }
}
