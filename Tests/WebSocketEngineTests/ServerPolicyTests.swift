import Glibc
import WebSocketCore
@testable import WebSocketEngine
import WebSocketTransport
import XCTest

/// HandshakePolicy (pure), ListenAddress, and the server's ordering lessons from Autobahn.
final class ServerPolicyTests: XCTestCase {
    func request(_ target: String = "/", _ headers: [(String, String)] = []) throws -> HandshakeRequest {
        let head = HTTPRequestHead(method: "GET", target: target, version: "HTTP/1.1", headers: [
            HTTPHeader(name: "Host", value: "h"), HTTPHeader(name: "Upgrade", value: "websocket"),
            HTTPHeader(name: "Connection", value: "Upgrade"), HTTPHeader(name: "Sec-WebSocket-Key", value: "dGhlIHNhbXBsZSBub25jZQ=="),
            HTTPHeader(name: "Sec-WebSocket-Version", value: "13")] + headers.map { HTTPHeader(name: $0.0, value: $0.1) })
        return try ServerHandshake.validate(head)
    }

    func status(_ decision: HandshakePolicy.Decision) -> Int {
        if case .refuse(let status, _, _) = decision { return status }
        return 101
    }

    func testOrderAndStatuses() throws {
        var policy = HandshakePolicy()
        policy.path = "/ws"
        policy.bearerToken = "tok"
        policy.allowedOrigins = ["https://A.example"]
        policy.subprotocols = ["v2", "v1"]
        policy.requiresSubprotocol = true
        let good: [(String, String)] = [("Authorization", "bearer tok"), ("Origin", "https://a.example"), ("Sec-WebSocket-Protocol", "x, v1, v2")]
        XCTAssertEqual(policy.decide(try request("/ws?q=1", good)), .accept(subprotocol: "v1"), "the client's order decides")
        XCTAssertEqual(status(policy.decide(try request("/other", []))), 404, "the path is checked first")
        XCTAssertEqual(status(policy.decide(try request("/ws", [("Origin", "https://a.example")]))), 401)
        if case .refuse(_, let headers, _) = policy.decide(try request("/ws", [("Authorization", "Bearer nope")])) {
            XCTAssertEqual(headers.first?.name, "WWW-Authenticate")
            XCTAssertTrue(headers.first?.value.hasPrefix("Bearer") ?? false)
        } else { XCTFail("a wrong token is refused") }
        XCTAssertEqual(status(policy.decide(try request("/ws", [("Authorization", "Basic dG9rOg==")]))), 401)
        XCTAssertEqual(status(policy.decide(try request("/ws", [("Authorization", "Bearer tok")]))), 403, "no Origin")
        XCTAssertEqual(status(policy.decide(try request("/ws", [("Authorization", "Bearer tok"), ("Origin", "https://a.example")]))), 400)
        policy.requiresSubprotocol = false
        XCTAssertEqual(policy.decide(try request("/ws", [("Authorization", "Bearer tok"), ("Origin", "https://a.example")])),
                       .accept(subprotocol: nil))
    }

    func testHealthAndConstantTimeCompare() {
        var policy = HandshakePolicy()
        XCTAssertNil(policy.answerPlainGet(method: "GET", target: "/healthz"))
        policy.healthPath = "/healthz"
        let answer = policy.answerPlainGet(method: "GET", target: "/healthz?probe=1").map { String(decoding: $0, as: UTF8.self) }
        XCTAssertTrue(answer?.hasPrefix("HTTP/1.1 200 OK\r\n") ?? false)
        XCTAssertTrue(answer?.hasSuffix("\r\n\r\nok\n") ?? false)
        XCTAssertNil(policy.answerPlainGet(method: "GET", target: "/other"))
        // The absolute-form (RFC 9112 §3.2.2) is its path; the authority is not looked at.
        XCTAssertNotNil(policy.answerPlainGet(method: "GET", target: "http://other.example:8080/healthz?probe=1"))
        XCTAssertNotNil(policy.answerPlainGet(method: "HEAD", target: "HTTP://h/healthz"))
        XCTAssertNil(policy.answerPlainGet(method: "GET", target: "http://h/healthz/x"))
        XCTAssertNil(policy.answerPlainGet(method: "GET", target: "healthz"))
        policy.metricsPath = "/metrics"
        let scrape = HTTPRequestHead(method: "GET", target: "http://127.0.0.1:9/metrics", version: "HTTP/1.1", headers: [])
        XCTAssertNotNil(policy.metricsAnswer(scrape) { "" })
        XCTAssertNil(policy.answerPlainGet(method: "POST", target: "/healthz"))
        XCTAssertTrue(HandshakePolicy.constantTimeEqual(Array("abc".utf8), Array("abc".utf8)))
        XCTAssertFalse(HandshakePolicy.constantTimeEqual(Array("abc".utf8), Array("abd".utf8)))
        XCTAssertFalse(HandshakePolicy.constantTimeEqual(Array("abc".utf8), Array("abcd".utf8)))
        XCTAssertFalse(HandshakePolicy.constantTimeEqual([], Array("a".utf8)))
    }

    func testListenAddresses() throws {
        XCTAssertEqual(try ListenAddress(parsing: "8080"), .tcp(address: "127.0.0.1", port: 8080))
        XCTAssertEqual(try ListenAddress(parsing: "0.0.0.0:0"), .tcp(address: "0.0.0.0", port: 0))
        XCTAssertEqual(try ListenAddress(parsing: "[::1]:9"), .tcp(address: "::1", port: 9))
        XCTAssertEqual(try ListenAddress(parsing: "[::1]:80"), .tcp(address: "::1", port: 80))
        // Bad brackets name the whole argument; a good bracket without a port names the port.
        for (bad, error) in [("[::1]", ListenAddress.ParseError.badAddress("[::1]")), ("[::1", .badAddress("[::1")),
                             ("[::1]80", .badAddress("[::1]80")), ("[::1]:", .badPort("")), ("[127.0.0.1]:80", .badAddress("127.0.0.1"))] {
            XCTAssertThrowsError(try ListenAddress(parsing: bad), bad) { XCTAssertEqual($0 as? ListenAddress.ParseError, error, bad) }
        }
        XCTAssertEqual(try ListenAddress(parsing: "unix:/tmp/x.sock"), .unix(path: "/tmp/x.sock"))
        XCTAssertEqual(ListenAddress.tcp(address: "::1", port: 9).description, "[::1]:9")
        XCTAssertEqual(try ListenAddress(parsing: "fd:3"), .descriptor(3))
        XCTAssertEqual(try ListenAddress(parsing: "systemd"), .systemd)
        for bad in ["", "65536", "-1", "x", "localhost:80", "[::1]", "::1:80", "[127.0.0.1]:80", "1.2.3.4:", "unix:", "80 ",
                    "fd:", "fd:2", "fd:x", "fd:-3", "fd:3 ", "systemd:"] {
            XCTAssertThrowsError(try ListenAddress(parsing: bad), bad)
        }
    }

    /// sd_listen_fds(3): the variables count only for the process LISTEN_PID names.
    func testSystemdActivationVariables() throws {
        XCTAssertEqual(try SystemdActivation.descriptors(listenPID: "42", listenFDs: "2", pid: 42), [3, 4])
        func problem(_ pid: String?, _ fds: String?) -> SystemdActivation.Problem? {
            do throws(SystemdActivation.Problem) {
                _ = try SystemdActivation.descriptors(listenPID: pid, listenFDs: fds, pid: 42)
                return nil
            } catch { return error }
        }
        XCTAssertEqual(problem(nil, "1"), .missing("LISTEN_PID"))
        XCTAssertEqual(problem("123", "1")?.description, "LISTEN_PID=123 is not this process (42)")
        XCTAssertEqual(problem("42", nil), .missing("LISTEN_FDS"))
        XCTAssertEqual(problem("42", "x"), .notANumber(name: "LISTEN_FDS", value: "x"))
        XCTAssertEqual(problem("x", "1"), .notANumber(name: "LISTEN_PID", value: "x"))
        XCTAssertEqual(problem("42", "0"), SystemdActivation.Problem.none)
    }

    /// Autobahn 5.6/5.19: a ping between two fragments is answered before the echo of the
    /// message it interrupted ends, even when all of them arrive in one read.
    func testPongPrecedesTheEchoOfTheInterruptedMessage() throws {
        let loop = try EventLoop()
        var fds: [Int32] = [-1, -1]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds), 0)
        let serverEnd = TCPStream(adopting: fds[0], remoteAddress: "pair")
        let client = fds[1]
        defer { close(client) }
        let mode = EchoMode()
        let server = ServerDriver(loop: loop, configuration: ServerConfiguration(), mode: mode)
        // Client frames, masked with a zero key: "ab" (not fin), ping "p", "cd" (fin).
        let frames: [UInt8] = [0x01, 0x82, 0, 0, 0, 0, 0x61, 0x62, 0x89, 0x81, 0, 0, 0, 0, 0x70, 0x80, 0x82, 0, 0, 0, 0, 0x63, 0x64]
        _ = frames.withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
        let info = ClientInfo(id: 1, request: try request(), clientAddress: .local(path: "pair"), localAddress: "pair", isSecure: false,
                              clientCertificateSubject: nil, subprotocol: nil)
        let handler = mode.handler(for: ServerConnection(info: info, server: server))
        let driver = ConnectionDriver(loop: loop, stream: serverEnd, core: WebSocketConnection(role: .server), delegate: handler)
        driver.start()
        var received: [UInt8] = []
        let deadline = Instant.now().adding(seconds: 3)
        let tick = loop.timer {}
        while received.count < 11 && Instant.now() < deadline {
            loop.arm(tick, at: Instant.now().adding(seconds: 0.01))
            loop.turn()
            var chunk = [UInt8](repeating: 0, count: 256)
            let n = recv(client, &chunk, chunk.count, Int32(MSG_DONTWAIT))
            if n > 0 { received += chunk[..<n] }
        }
        // Unmasked server frames: 01 02 "ab", then the pong 8a 01 "p", then 80 02 "cd" (and the end).
        guard let pong = received.firstIndex(of: 0x8A), let end = received.lastIndex(where: { $0 == 0x80 }) else {
            return XCTFail("no pong or no final frame in \(received)")
        }
        XCTAssertLessThan(pong, end, "the pong comes before the message's final frame: \(received)")
        driver.abandon()
    }
}
