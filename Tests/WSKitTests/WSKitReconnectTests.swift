import Foundation
import XCTest
import TestSupport
import WSKit

/// `WebSocket.reconnecting` across a Python `websockets` server that is killed and started
/// again on the same port, and against WSKit's own server for Retry-After and refusals.
final class WSKitReconnectTests: XCTestCase {
    private static func echoServer(port: Int = 0) throws -> Peer {
        try Peer.launch(executable: Locations.python, arguments: ["\(Locations.peers)/echo.py", "--port", "\(port)"],
                        environment: Locations.baseEnvironment)
    }

    private static var quick: ReconnectPolicy {
        var policy = ReconnectPolicy(resubscribe: [.text("subscribe")])
        policy.baseDelay = .milliseconds(50)
        policy.maxDelay = .milliseconds(200)
        return policy
    }

    func testEventsInOrderAcrossAServerRestartWithResubscriptionAndTheOfflineQueue() async throws {
        let first = try Self.echoServer()
        let port = first.port
        let box = PeerBox()
        box.peer = first
        defer { box.peer?.process.kill() }
        let run = try WebSocket.reconnecting(to: "ws://127.0.0.1:\(port)/", policy: Self.quick)
        let log = try await withTimeout(30) { () -> [String] in
            var log: [String] = []
            var connections = 0
            var restarted = false
            for try await event in run {
                switch event {
                case .connected(let connection):
                    connections += 1
                    log.append("connected")
                    XCTAssertGreaterThanOrEqual(connection.attempt, connections)
                case .message(.text(let text)):
                    log.append("message \(text)")
                    if connections == 1 && text == "subscribe" {
                        try await run.send(.text("live"))
                    } else if connections == 1 && text == "live" {
                        box.peer?.process.kill()  // SIGKILL: no closing handshake
                    } else if connections == 2 && text == "queued" {
                        try await run.close()
                    }
                case .message(let other):
                    log.append("unexpected \(other)")
                case .disconnected(let error, let retryIn):
                    if retryIn == nil {
                        log.append("finished \(error)")
                    } else if !restarted {
                        log.append("disconnected")
                        restarted = true
                        // While down: this goes to the offline queue and out after the resubscription.
                        try await run.send(.text("queued"))
                        XCTAssertNil(run.current)
                        box.peer = try WSKitReconnectTests.echoServer(port: port)
                    }
                case .dropped(let count):
                    log.append("dropped \(count)")
                }
            }
            return log
        }
        XCTAssertEqual(log, ["connected", "message subscribe", "message live", "disconnected",
                             "connected", "message subscribe", "message queued",
                             "finished the connection is closed (the peer closed it with 1000)"])
    }

    func testCloseWaitsForASlowServerThatIsStillReplying() async throws {
        // As WebSocket.close (issue 26): the echoes still coming count as progress.
        let peer = try Peer.launch(executable: Locations.python,
                                   arguments: ["\(Locations.peers)/echo.py", "--port", "0", "--pause-every", "500", "--pause", "0.05"],
                                   environment: Locations.baseEnvironment)
        defer { peer.process.kill() }
        var options = WebSocketOptions()
        options.closeTimeout = .seconds(1)
        // No resubscription: the server's pauses fall after its 500th, 1000th... echo, so the
        // last one goes out before a pause (a server that pauses between reading a message
        // and answering it, and drops the answer at the Close, needs a linger: the Pong says
        // it read everything, not that it answered everything).
        var policy = Self.quick
        policy.resubscribe = []
        let run = try WebSocket.reconnecting(to: "ws://127.0.0.1:\(peer.port)/", options: options, policy: policy)
        let count = 20_000
        let received = try await withTimeout(60) { () -> [String] in
            var messages: [String] = []
            var sender: Task<Void, Error>?
            for try await event in run {
                switch event {
                case .connected:
                    sender = Task {
                        for i in 0..<count { try await run.send(.text("m\(i)")) }
                        try await run.close()
                    }
                case .message(.text(let text)):
                    messages.append(text)
                default:
                    break
                }
            }
            try await sender?.value
            return messages
        }
        let expected = (0..<count).map { "m\($0)" }
        XCTAssertEqual(received.count, count, "missing: \(Set(expected).subtracting(received).sorted().prefix(10))")
        XCTAssertEqual(received, expected)
        XCTAssertEqual(run.deliveryConfirmed, true)
    }

    func testRetryAfterIsHonouredAndARefusalIsNotRetried() async throws {
        let server = try await WebSocketServer.bind(to: "127.0.0.1:0")
        let port = try XCTUnwrap(server.port)
        let serving = Task {
            var count = 0
            for await pending in server {
                count += 1
                if count == 1 {
                    try? pending.reject(status: 503, headers: [(name: "Retry-After", value: "1")])
                } else if pending.request.path == "/gone" {
                    try? pending.reject(status: 404)
                } else if let ws = try? await pending.accept() {
                    try? await ws.close(code: 4000, reason: "bye")
                }
            }
        }
        try await withTimeout(30) {
            var policy = WSKitReconnectTests.quick
            policy.resubscribe = []
            let run = try WebSocket.reconnecting(to: "ws://127.0.0.1:\(port)/", policy: policy)
            var events: [ReconnectEvent] = []
            for try await event in run { events.append(event) }
            XCTAssertEqual(events.count, 3, "\(events)")
            guard events.count == 3 else { return }
            if case .disconnected(.handshakeRejected(503?, _), let retryIn?) = events[0] {
                XCTAssertGreaterThanOrEqual(retryIn, .seconds(1))  // above maxDelay (0.2 s)
            } else {
                XCTFail("\(events[0])")
            }
            if case .connected(let connection) = events[1] { XCTAssertEqual(connection.attempt, 2) } else { XCTFail("\(events[1])") }
            // 4000 is not a code that asks to come back.
            XCTAssertEqual(events[2], .disconnected(.closed(code: 4000, reason: "bye"), retryIn: nil))

            let gone = try WebSocket.reconnecting(to: "ws://127.0.0.1:\(port)/gone", policy: policy)
            var goneEvents: [ReconnectEvent] = []
            for try await event in gone { goneEvents.append(event) }
            XCTAssertEqual(goneEvents.count, 1)
            if case .disconnected(.handshakeRejected(404?, _), nil)? = goneEvents.first {} else { XCTFail("\(goneEvents)") }
        }
        await server.close()
        _ = await serving.value
    }

    func testCloseAndCancellationEndALongBackoffWait() async throws {
        let server = try await WebSocketServer.bind(to: "127.0.0.1:0")
        let port = try XCTUnwrap(server.port)
        let serving = Task {
            for await pending in server { try? pending.reject(status: 503, headers: [(name: "Retry-After", value: "600")]) }
        }
        let url = "ws://127.0.0.1:\(port)/"
        try await withTimeout(20) {
            // close() during the 600 s wait: the run ends at once.
            let closed = try WebSocket.reconnecting(to: url, policy: Self.quick)
            var iterator = closed.makeAsyncIterator()
            let first = try await iterator.next()
            guard case .disconnected(_, let retryIn?)? = first, retryIn >= .seconds(600) else { return XCTFail("\(String(describing: first))") }
            // The rest of the run (the same state: any iterator continues it).
            let rest = Task { () -> [ReconnectEvent] in
                var events: [ReconnectEvent] = []
                for try await event in closed { events.append(event) }
                return events
            }
            try await Task.sleep(for: .milliseconds(100))
            try await closed.close()
            let remaining = try await rest.value
            XCTAssertEqual(remaining, [.disconnected(.closed(code: 1000, reason: ""), retryIn: nil)])

            // Cancelling the iterating task during the wait: .cancelled, at once.
            let cancelled = try WebSocket.reconnecting(to: url, policy: Self.quick)
            let consumer = Task { () -> WebSocketError? in
                do {
                    for try await _ in cancelled {}
                    return nil
                } catch let error as WebSocketError {
                    return error
                } catch {
                    return .invalidArgument("not a WebSocketError: \(error)")
                }
            }
            try await Task.sleep(for: .milliseconds(300))
            consumer.cancel()
            let thrown = await consumer.value
            XCTAssertEqual(thrown, .cancelled)
        }
        await server.close()
        _ = await serving.value
    }

    func testRetriesAreSpentAndTheDropPolicyCounts() async throws {
        // A port nobody listens on: every attempt is refused.
        let probe = try await WebSocketServer.bind(to: "127.0.0.1:0")
        let port = try XCTUnwrap(probe.port)
        await probe.close()
        var policy = Self.quick
        policy.maxRetries = 2
        policy.queueSize = 2
        policy.queuePolicy = .dropOldest
        let run = try WebSocket.reconnecting(to: "ws://127.0.0.1:\(port)/", policy: policy)
        for n in 0..<5 { try await run.send(.text("\(n)")) }
        let events = try await withTimeout(20) { () -> [ReconnectEvent] in
            var events: [ReconnectEvent] = []
            for try await event in run { events.append(event) }
            return events
        }
        XCTAssertEqual(events.first, .dropped(count: 3), "\(events)")
        let retries = events.compactMap { event -> Duration?? in
            if case .disconnected(.cannotConnect, let retryIn) = event { return .some(retryIn) }
            return nil
        }
        XCTAssertEqual(retries.count, 3, "\(events)")  // the first attempt and two retries
        XCTAssertNotNil(retries.first ?? nil)
        XCTAssertNil(retries.last ?? nil)
    }
}

/// The current server process, replaced from inside the test's loop.
final class PeerBox: @unchecked Sendable {
    var peer: Peer?
}
