import Foundation
import Glibc
import XCTest
import TestSupport
import WSKit

/// WSKit's WebSocketServer against Python `websockets` clients (wskit_client.py) and
/// WSKit's own clients. Every wait is bounded.
final class WSKitServerTests: XCTestCase {
    private func pythonClient(_ arguments: [String]) throws -> ChildProcess {
        try ChildProcess(executable: Locations.python, arguments: ["\(Locations.peers)/wskit_client.py"] + arguments,
                         environment: Locations.baseEnvironment)
    }

    /// Runs `handler` for every pending connection in a child task, until the server closes.
    private func serve(_ server: WebSocketServer, _ handler: @escaping @Sendable (PendingConnection) async -> Void) -> Task<Void, Never> {
        Task {
            await withTaskGroup(of: Void.self) { group in
                for await pending in server {
                    group.addTask { await handler(pending) }
                }
            }
        }
    }

    func testRequestIsVisibleBeforeAcceptAndMessagesFlowWithPython() async throws {
        let server = try await WebSocketServer.bind(to: "127.0.0.1:0")
        XCTAssertTrue(server.localAddress.hasPrefix("127.0.0.1:"))
        let port = try XCTUnwrap(server.port)
        XCTAssertEqual(server.localAddress, "127.0.0.1:\(port)")
        let client = try pythonClient(["connect", "ws://127.0.0.1:\(port)/chat?room=1", "--header", "X-Test:yes",
                                       "--subprotocols", "v1,v2", "--send", "hi"])
        try await withTimeout {
            var iterator = server.makeAsyncIterator()
            let nextpending = await iterator.next()
            let pending = try XCTUnwrap(nextpending)
            XCTAssertEqual(pending.request.path, "/chat")
            XCTAssertEqual(pending.request.query, "room=1")
            XCTAssertEqual(pending.request.values("x-test"), ["yes"])
            XCTAssertEqual(pending.request.subprotocols, ["v1", "v2"])
            XCTAssertTrue(pending.request.remoteAddress.hasPrefix("127.0.0.1:"), pending.request.remoteAddress)
            let ws = try await pending.accept(subprotocol: "v2", headers: [(name: "X-Served-By", value: "wskit")])
            XCTAssertEqual(ws.subprotocol, "v2")
            XCTAssertNil(ws.url)
            XCTAssertEqual(ws.request?.path, "/chat")
            var messages = ws.messages.makeAsyncIterator()
            let first = try await messages.next()
            XCTAssertEqual(first, .text("hi"))
            try await ws.send(.text("re: hi"))
            try await ws.close(code: 4000, reason: "done")
            XCTAssertEqual(ws.closeCode, 4000)
        }
        let result = await finished(client, timeout: 20)
        XCTAssertEqual(result.stdoutText, "open v2\nmessage re: hi\nclosed 4000 done\n", "\(result)")
        await server.close()
    }

    func testRejectStatusAndReasonReachAPythonClient() async throws {
        let server = try await WebSocketServer.bind(to: "127.0.0.1:0")
        let port = try XCTUnwrap(server.port)
        let client = try pythonClient(["connect", "ws://127.0.0.1:\(port)/private"])
        try await withTimeout {
            var iterator = server.makeAsyncIterator()
            let nextpending = await iterator.next()
            let pending = try XCTUnwrap(nextpending)
            XCTAssertThrowsError(try pending.reject(status: 200))  // not a refusal
            try pending.reject(status: 403, reason: "not for you")
            XCTAssertThrowsError(try pending.reject(status: 404))  // decided once
        }
        let result = await finished(client, timeout: 20)
        XCTAssertEqual(result.stdoutText, "status 403\nbody not for you\n", "\(result)")
        await server.close()
    }

    /// A server on a free port that accepts every client and reads it to its end.
    private func acceptingAll(_ options: WebSocketServerOptions) async throws -> (WebSocketServer, Int, Task<Void, Never>) {
        let server = try await WebSocketServer.bind(to: "127.0.0.1:0", options: options)
        let port = try XCTUnwrap(server.port)
        let handling = serve(server) { pending in
            guard let ws = try? await pending.accept() else { return }
            for await _ in ws.messages.dropAll() {}
        }
        return (server, port, handling)
    }

    func testRequiresSameOriginAdmitsTheServersOwnOriginAndNone() async throws {
        var options = WebSocketServerOptions()
        options.requiresSameOrigin = true
        let (server, port, handling) = try await acceptingAll(options)
        try await withTimeout(30) {
            func status(origin: String?) async -> Int? {
                var options = WebSocketOptions()
                options.origin = origin
                do {
                    let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(port)/", options: options)
                    try? await ws.close()
                    return 101
                } catch {
                    if case .handshakeRejected(let status, _) = error { return status }
                    return -1
                }
            }
            let own = await status(origin: "http://127.0.0.1:\(port)")
            XCTAssertEqual(own, 101)
            let none = await status(origin: nil)
            XCTAssertEqual(none, 101)
            let other = await status(origin: "http://127.0.0.1:\(port + 1)")
            XCTAssertEqual(other, 403)
            let https = await status(origin: "https://127.0.0.1:\(port)")
            XCTAssertEqual(https, 403, "the server is ws://")
        }
        await server.close()
        await handling.value
    }

    func testPathAndOriginChecksAndTheClientLimitRefuseBeforeTheHandler() async throws {
        var options = WebSocketServerOptions(maximumClients: 1, path: "/ws", allowedOrigins: ["https://app.example"])
        options.maximumRequestHeadSize = 1024
        let (server, port, handling) = try await acceptingAll(options)
        try await withTimeout(30) {
            func refusal(_ path: String, origin: String?, extra: [String: String] = [:]) async -> Int? {
                var options = WebSocketOptions(headers: extra)
                options.origin = origin
                do {
                    let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(port)\(path)", options: options)
                    try? await ws.close()
                    return nil
                } catch {
                    if case .handshakeRejected(let status, _) = error { return status }
                    return -1
                }
            }
            let wrongPath = await refusal("/other", origin: "https://app.example")
            XCTAssertEqual(wrongPath, 404)
            let wrongOrigin = await refusal("/ws", origin: "https://evil.example")
            XCTAssertEqual(wrongOrigin, 403)
            let bigHead = await refusal("/ws", origin: "https://app.example", extra: ["X-Big": String(repeating: "a", count: 2000)])
            XCTAssertEqual(bigHead, 431)
            var allowed = WebSocketOptions()
            allowed.origin = "https://app.example"
            let first = try await WebSocket.connect(to: "ws://127.0.0.1:\(port)/ws", options: allowed)
            // The second is one client too many.
            let second = await refusal("/ws", origin: "https://app.example")
            XCTAssertEqual(second, 503)
            try await first.close()
        }
        await server.close()
        _ = await handling.value
    }

    func testABearerTokenAndAHealthPathAreAnsweredBeforeTheHandler() async throws {
        var options = WebSocketServerOptions()
        options.bearerToken = "s3cret"
        options.healthPath = "/healthz"
        let server = try await WebSocketServer.bind(to: "127.0.0.1:0", options: options)
        let port = try XCTUnwrap(server.port)
        let handling = serve(server) { pending in
            guard let ws = try? await pending.accept() else { return }
            try? await ws.send(.text("in"))
            try? await ws.close()
        }
        let missing = try pythonClient(["connect", "ws://127.0.0.1:\(port)/"])
        let result = await finished(missing, timeout: 20)
        XCTAssertEqual(result.stdoutText, "status 401\nbody a bearer token is required\n", "\(result)")
        try await withTimeout {
            let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(port)/", options: .init(bearerToken: "s3cret"))
            var messages = ws.messages.makeAsyncIterator()
            let greeting = try await messages.next()
            XCTAssertEqual(greeting, .text("in"))
            // The health path answers a plain GET.
            let fd = try connectRaw(port: port)
            defer { close(fd) }
            _ = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".withCString { send(fd, $0, strlen($0), 0) }
            var answer = [UInt8](repeating: 0, count: 512)
            let n = recv(fd, &answer, answer.count, 0)
            XCTAssertTrue(String(decoding: answer[..<max(n, 0)], as: UTF8.self).hasPrefix("HTTP/1.1 200 OK\r\n"))
        }
        await server.close()
        _ = await handling.value
    }

    func testServerCloseSendsGoingAwayToEveryClientAndEndsIteration() async throws {
        let server = try await WebSocketServer.bind(to: "127.0.0.1:0")
        let port = try XCTUnwrap(server.port)
        // One handler keeps its socket without ever reading it (accepted but never iterated).
        let handling = serve(server) { pending in
            guard let ws = try? await pending.accept() else { return }
            try? await ws.send(.text("welcome"))
            try? await Task.sleep(for: .seconds(60))
            _ = ws
        }
        try await withTimeout(30) {
            let a = try await WebSocket.connect(to: "ws://127.0.0.1:\(port)/")
            let b = try await WebSocket.connect(to: "ws://127.0.0.1:\(port)/")
            var ai = a.messages.makeAsyncIterator()
            var bi = b.messages.makeAsyncIterator()
            let wa = try await ai.next()
            let wb = try await bi.next()
            XCTAssertEqual(wa, .text("welcome"))
            XCTAssertEqual(wb, .text("welcome"))
            XCTAssertEqual(server.clientCount, 2)
            async let closing: Void = server.close()
            let endA = try await ai.next()
            let endB = try await bi.next()
            XCTAssertNil(endA)
            XCTAssertNil(endB)
            XCTAssertEqual(a.closeCode, 1001)
            XCTAssertEqual(b.closeCode, 1001)
            await closing
            XCTAssertEqual(server.clientCount, 0)
            // Iteration has ended: the serving task's loop returns once its handlers do.
            handling.cancel()
            _ = await handling.value
            // No more clients.
            do {
                _ = try await WebSocket.connect(to: "ws://127.0.0.1:\(port)/")
                XCTFail("connected to a closed server")
            } catch let error as WebSocketError {
                guard case .cannotConnect = error else { return XCTFail("\(error)") }
            }
        }
    }

    func testCancellingAHandlerClosesItsConnectionCleanly() async throws {
        let server = try await WebSocketServer.bind(to: "127.0.0.1:0")
        let port = try XCTUnwrap(server.port)
        try await withTimeout {
            let client = Task { try await WebSocket.connect(to: "ws://127.0.0.1:\(port)/") }
            var iterator = server.makeAsyncIterator()
            let nextpending = await iterator.next()
            let pending = try XCTUnwrap(nextpending)
            let handler = Task {
                let ws = try await pending.accept()
                for try await _ in ws.messages {}
            }
            let ws = try await client.value
            try await ws.send(.text("ping"))
            try await Task.sleep(for: .milliseconds(100))
            handler.cancel()
            var messages = ws.messages.makeAsyncIterator()
            let end = try await messages.next()
            XCTAssertNil(end)  // a closing handshake, not a failure
            XCTAssertEqual(ws.closeCode, 1001)
            do {
                try await handler.value
                XCTFail("the handler's messages did not throw .cancelled")
            } catch let error as WebSocketError {
                XCTAssertEqual(error, .cancelled)
            }
        }
        await server.close()
    }

    func testPendingConnectionsEndedByTheServerOrTheTimeoutThrowOnAccept() async throws {
        var options = WebSocketServerOptions()
        options.handshakeTimeout = .milliseconds(500)
        let server = try await WebSocketServer.bind(to: "127.0.0.1:0", options: options)
        let port = try XCTUnwrap(server.port)
        try await withTimeout {
            // Held past the handshake timeout: the client is dropped, accept throws.
            let late = Task { try await WebSocket.connect(to: "ws://127.0.0.1:\(port)/") }
            var iterator = server.makeAsyncIterator()
            let nextpending = await iterator.next()
            let pending = try XCTUnwrap(nextpending)
            try await Task.sleep(for: .milliseconds(900))
            do {
                _ = try await pending.accept()
                XCTFail("accepted after the handshake timeout")
            } catch let error as WebSocketError {
                guard case .connectionLost = error else { return XCTFail("\(error)") }
            }
            do {
                _ = try await late.value
                XCTFail("the client connected")
            } catch let error as WebSocketError {
                guard case .handshakeRejected = error else { return XCTFail("\(error)") }
            }
            // A pending connection dropped undecided is refused with 503 at once.
            let dropped = Task { try await WebSocket.connect(to: "ws://127.0.0.1:\(port)/") }
            _ = await iterator.next()
            do {
                _ = try await dropped.value
                XCTFail("the client connected")
            } catch let error as WebSocketError {
                guard case .handshakeRejected(503?, _) = error else { return XCTFail("\(error)") }
            }
            // Waiting when the server closes.
            let waiting = Task { try await WebSocket.connect(to: "ws://127.0.0.1:\(port)/") }
            let nextheld = await iterator.next()
            let held = try XCTUnwrap(nextheld)
            await server.close()
            do {
                _ = try await held.accept()
                XCTFail("accepted after the close")
            } catch let error as WebSocketError {
                guard case .connectionLost = error else { return XCTFail("\(error)") }
            }
            _ = try? await waiting.value
            let after = await iterator.next()
            XCTAssertNil(after)
        }
    }

    func testClientGoneBeforeAcceptEndsTheSocketOrThrows() async throws {
        let server = try await WebSocketServer.bind(to: "127.0.0.1:0")
        let port = try XCTUnwrap(server.port)
        try await withTimeout {
            // A raw client sends a valid request and resets the connection at once.
            let fd = try connectRaw(port: port)
            sendUpgradeRequest(fd)
            var iterator = server.makeAsyncIterator()
            let nextpending = await iterator.next()
            let pending = try XCTUnwrap(nextpending)
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
            close(fd)
            try await Task.sleep(for: .milliseconds(100))
            do {
                let ws = try await pending.accept()
                for try await _ in ws.messages {}
                XCTFail("a reset connection ended cleanly")
            } catch let error as WebSocketError {
                switch error {
                case .connectionLost: break
                default: XCTFail("\(error)")
                }
            }
            // A client that closes its side while its handshake waits: seen before any 101.
            let polite = try connectRaw(port: port)
            sendUpgradeRequest(polite)
            let nextHeld = await iterator.next()
            let held = try XCTUnwrap(nextHeld)
            close(polite)
            try await Task.sleep(for: .milliseconds(100))
            do {
                _ = try await held.accept()
                XCTFail("accepted a client that had left")
            } catch let error as WebSocketError {
                guard case .connectionLost = error else { return XCTFail("\(error)") }
            }
        }
        await server.close()
    }

    func testCancellingTheIteratingTaskClosesTheServer() async throws {
        let server = try await WebSocketServer.bind(to: "127.0.0.1:0")
        let port = try XCTUnwrap(server.port)
        let accepted = AsyncStream<WebSocket>.makeStream()
        let iterating = Task {
            for await pending in server {
                if let ws = try? await pending.accept() { accepted.continuation.yield(ws) }
            }
        }
        try await withTimeout {
            let client = try await WebSocket.connect(to: "ws://127.0.0.1:\(port)/")
            var sockets = accepted.stream.makeAsyncIterator()
            let serverSide = await sockets.next()
            XCTAssertNotNil(serverSide)
            iterating.cancel()
            _ = await iterating.value
            var messages = client.messages.makeAsyncIterator()
            let end = try await messages.next()
            XCTAssertNil(end)
            XCTAssertEqual(client.closeCode, 1001)
            do {
                _ = try await WebSocket.connect(to: "ws://127.0.0.1:\(port)/")
                XCTFail("connected after the cancellation")
            } catch let error as WebSocketError {
                guard case .cannotConnect = error else { return XCTFail("\(error)") }
            }
        }
    }

    func testAUnixSocketServer() async throws {
        let path = NSTemporaryDirectory() + "wskit-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        let server = try await WebSocketServer.bind(to: "unix:" + path)
        XCTAssertNil(server.port)
        XCTAssertEqual(server.localAddress, "unix:" + path)
        let serving = serve(server) { pending in
            guard let ws = try? await pending.accept() else { return }
            try? await ws.send(.text("path \(pending.request.path)"))
            try? await ws.close()
        }
        try await withTimeout {
            let ws = try await WebSocket.connect(to: "ws+unix://\(path):/over-unix")
            var messages = ws.messages.makeAsyncIterator()
            let greeting = try await messages.next()
            XCTAssertEqual(greeting, .text("path /over-unix"))
        }
        await server.close()
        _ = await serving.value
        XCTAssertFalse(FileManager.default.fileExists(atPath: path), "the socket file stays after close")
    }

    func testAThousandConcurrentClients() async throws {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        if limit.rlim_cur < 8192 {
            limit.rlim_cur = min(8192, limit.rlim_max)
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        let server = try await WebSocketServer.bind(to: "127.0.0.1:0")
        let port = try XCTUnwrap(server.port)
        let handling = serve(server) { pending in
            guard let ws = try? await pending.accept() else { return }
            do {
                for try await message in ws.messages {
                    guard case .text(let text) = message else { continue }
                    try await ws.send(.text("re:" + text))
                }
            } catch {}
        }
        let count = 1000
        let answered = try await withTimeout(90) { () -> Int in
            try await withThrowingTaskGroup(of: WebSocket.self) { group in
                for n in 0..<count {
                    group.addTask {
                        let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(port)/")
                        try await ws.send(.text("\(n)"))
                        var messages = ws.messages.makeAsyncIterator()
                        let answer = try await messages.next()
                        guard answer == .text("re:\(n)") else { throw HarnessError("client \(n) got \(String(describing: answer))") }
                        return ws
                    }
                }
                var open: [WebSocket] = []
                for try await ws in group { open.append(ws) }
                // All connected at once before any closes.
                XCTAssertEqual(server.clientCount, count)
                for ws in open { try await ws.close() }
                return open.count
            }
        }
        XCTAssertEqual(answered, count)
        await server.close()
        _ = await handling.value
    }
}

/// A blocking TCP connection to 127.0.0.1:`port`.
/// A valid opening handshake request, sent by hand on a raw socket.
func sendUpgradeRequest(_ fd: Int32) {
    let request = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    _ = request.withCString { send(fd, $0, strlen($0), 0) }
}

func connectRaw(port: Int) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let status = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard status == 0 else { close(fd); throw HarnessError("connect: \(String(cString: strerror(errno)))") }
    return fd
}

extension Messages {
    /// The messages, errors ignored (a handler that only drains).
    func dropAll() -> AsyncStream<Message> {
        AsyncStream { continuation in
            let task = Task {
                do { for try await message in self { continuation.yield(message) } } catch {}
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}
