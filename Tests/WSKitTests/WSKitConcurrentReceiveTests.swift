import Synchronization
import XCTest
import WSKit

/// Several tasks awaiting `next()` on one connection's `messages` at once: each gets its
/// own message, in the order they started waiting, and none is left hanging (a cancelled
/// one is resumed with `.cancelled`, the others by the connection's end). WSKit's own
/// server is the peer; every wait is bounded.
final class WSKitConcurrentReceiveTests: XCTestCase {
    /// A server whose first client is handed to `body`; returns the server and a client.
    private func connected(_ body: @escaping @Sendable (WebSocket) async throws -> Void) async throws
        -> (WebSocketServer, WebSocket, Task<Void, any Error>) {
        let server = try await WebSocketServer.bind(to: "127.0.0.1:0")
        let port = try XCTUnwrap(server.port)
        let serving = Task {
            var pending = server.makeAsyncIterator()
            guard let first = await pending.next() else { return }
            try await body(try await first.accept())
        }
        let client = try await WebSocket.connect(to: "ws://127.0.0.1:\(port)/")
        return (server, client, serving)
    }

    /// Starts a task that waits for the next message on `messages`, and returns once it
    /// waits (its `next()` has found nothing buffered: the server sends only when told).
    private static func waiter(_ ws: WebSocket) -> Task<Result<Message?, WebSocketError>, Never> {
        Task {
            var iterator = ws.messages.makeAsyncIterator()
            do throws(WebSocketError) { return .success(try await iterator.next()) } catch { return .failure(error) }
        }
    }

    func testConcurrentWaitersEachGetTheirOwnMessageInOrder() async throws {
        let go = Gate()
        let (server, client, serving) = try await connected { ws in
            await go.wait()
            for index in 1...3 { try await ws.send(.text("m\(index)")) }
            try await ws.close()
        }
        try await withTimeout(20) {
            var waiters: [Task<Result<Message?, WebSocketError>, Never>] = []
            for _ in 1...3 {
                waiters.append(Self.waiter(client))
                try await Task.sleep(for: .milliseconds(100))  // each waits before the next starts
            }
            go.open()
            var got: [Result<Message?, WebSocketError>] = []
            for waiter in waiters { got.append(await waiter.value) }
            XCTAssertEqual(got, [.success(.text("m1")), .success(.text("m2")), .success(.text("m3"))])
            // The sequence then ends for every caller.
            var after = client.messages.makeAsyncIterator()
            let end = try await after.next()
            XCTAssertNil(end)
        }
        try await withTimeout(20) { try await serving.value }
        await server.close()
    }

    func testCancellingOneWaiterResumesItAndNoOther() async throws {
        let go = Gate()
        let (server, client, serving) = try await connected { ws in
            await go.wait()
            try? await ws.send(.text("late"))
            try? await ws.close()
        }
        try await withTimeout(20) {
            let first = Self.waiter(client)
            try await Task.sleep(for: .milliseconds(100))
            let second = Self.waiter(client)
            try await Task.sleep(for: .milliseconds(100))
            second.cancel()
            // The cancelled one is resumed at once with `.cancelled`, not the other.
            let cancelled = await second.value
            XCTAssertEqual(cancelled, .failure(.cancelled))
            // Cancelling a consumer closes the connection with 1001; the first waiter is
            // resumed by the end (the server's message or the end of the sequence), not lost.
            go.open()
            let other = await first.value
            XCTAssertNotEqual(other, .failure(.cancelled))
        }
        // The first waiter may have had the server's message while the closing handshake
        // was still going (it failed once as "closing" on a loaded machine).
        try await eventually("the client closed") { client.state == .closed }
        XCTAssertEqual(client.state, .closed)
        _ = try? await withTimeout(20) { try await serving.value }
        await server.close()
    }

    func testAWaitCancelledBeforeItStartsThrowsCancelledAtOnce() async throws {
        let (server, client, serving) = try await connected { ws in
            for try await _ in ws.messages {}
        }
        try await withTimeout(20) {
            let started = Gate()
            let task = Task { () -> Result<Message?, WebSocketError> in
                await started.wait()  // cancelled before `next()` is called
                var iterator = client.messages.makeAsyncIterator()
                do throws(WebSocketError) { return .success(try await iterator.next()) } catch { return .failure(error) }
            }
            task.cancel()
            started.open()
            let result = await task.value
            XCTAssertEqual(result, .failure(.cancelled))
        }
        try await withTimeout(20) { try await serving.value }
        await server.close()
    }

    func testConcurrentWaitersOnAServerEachGetTheirOwnConnection() async throws {
        let server = try await WebSocketServer.bind(to: "127.0.0.1:0")
        let port = try XCTUnwrap(server.port)
        try await withTimeout(20) {
            var waiters: [Task<String?, Never>] = []
            for _ in 1...3 {
                waiters.append(Task {
                    var iterator = server.makeAsyncIterator()
                    guard let pending = await iterator.next() else { return nil }
                    return pending.request.path
                })
                try await Task.sleep(for: .milliseconds(100))
            }
            // Two clients, one after the other: the first two waiters get one each.
            var clients: [Task<Void, Never>] = []
            for index in 1...2 {
                clients.append(Task { _ = try? await WebSocket.connect(to: "ws://127.0.0.1:\(port)/c\(index)") })
                let path = await waiters[index - 1].value
                XCTAssertEqual(path, "/c\(index)")
            }
            // The third is resumed by the close, with the end.
            await server.close()
            let last = await waiters[2].value
            XCTAssertNil(last)
            for client in clients { client.cancel(); await client.value }
        }
    }
}

/// Opens once; `wait` returns once it is open (checks every 10 ms, cancelled or not).
private final class Gate: Sendable {
    private let state = Mutex(false)
    func open() { state.withLock { $0 = true } }
    func wait() async {
        while !state.withLock({ $0 }) {
            do { try await Task.sleep(for: .milliseconds(10)) } catch { await Task.yield() }
        }
    }
}
