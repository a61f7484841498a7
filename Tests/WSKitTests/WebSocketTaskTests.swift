import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import XCTest
import TestSupport
import WSKit
import WSKitFoundation

/// `WebSocketTask` with the meaning of Apple's `URLSessionWebSocketTask`: call order, cancel
/// at every moment, the delegate, error descriptions. Raw peers (raw.py) record what
/// arrived, in order.
final class WebSocketTaskTests: XCTestCase {
    /// What raw.py records of a connection (the part these tests read).
    struct Record: Decodable {
        struct Message: Decodable { let type: String; let data: String }
        struct Close: Decodable { let code: Int?; let reason: String }
        let messages: [Message]
        let events: [String]
        let close: Close?
        var texts: [String] { messages.map { String(decoding: Data(base64Encoded: $0.data) ?? Data(), as: UTF8.self) } }
        /// "m" for a message, "p" for a ping, in arrival order.
        var pattern: String { events.map { $0 == "ping" ? "p" : "m" }.joined() }
    }

    private var peers: [Peer] = []
    private var directory = ""

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "wstask-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDown() {
        for peer in peers { peer.process.kill() }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// raw.py answering the handshake with a plain 101 (after `delay` seconds), then
    /// recording frames in order.
    private func rawPeer(handshakeDelay: Double = 0) throws -> Peer {
        let script = directory + "/script-\(UUID().uuidString)"
        try Data(Wire.switching).write(to: URL(fileURLWithPath: script))
        let record = directory + "/record-\(UUID().uuidString).json"
        let scenario = ["--scenario", "script", "--delay", "\(handshakeDelay)"]
        let peer = try Peer.launch(executable: Locations.python,
                                   arguments: ["\(Locations.peers)/raw.py", "--port", "0", "--record", record, "--script", script] + scenario,
                                   environment: Locations.baseEnvironment, recordFile: record)
        peers.append(peer)
        return peer
    }

    /// raw.py acting out one of its scenarios.
    private func rawScenario(_ name: String) throws -> Peer {
        let record = directory + "/record-\(UUID().uuidString).json"
        let peer = try Peer.launch(executable: Locations.python,
                                   arguments: ["\(Locations.peers)/raw.py", "--port", "0", "--record", record, "--scenario", name],
                                   environment: Locations.baseEnvironment, recordFile: record)
        peers.append(peer)
        return peer
    }

    private func echoPeer(_ arguments: [String] = []) throws -> Peer {
        let peer = try Peer.launch(executable: Locations.python, arguments: ["\(Locations.peers)/echo.py", "--port", "0"] + arguments,
                                   environment: Locations.baseEnvironment)
        peers.append(peer)
        return peer
    }

    private func url(_ peer: Peer, _ scheme: String = "ws", host: String = "127.0.0.1") -> URL {
        URL(string: "\(scheme)://\(host):\(peer.port)/")!
    }

    // MARK: - Order

    /// 1,000 calls from one task, alternating a completion-handler send (not awaited), an
    /// awaited send and a ping: the peer sees them in call order (WSKIT_ORDER_ROUNDS rounds,
    /// default 3). Each completion-handler send started a task of its own: out of order in
    /// 2 to 7 of 20 rounds of 300.
    func testCallsFromOneTaskArriveInCallOrder() async throws {
        let rounds = Int(ProcessInfo.processInfo.environment["WSKIT_ORDER_ROUNDS"] ?? "") ?? 3
        for round in 1...rounds {
            let peer = try rawPeer()
            let task = WebSocketTask(with: url(peer))
            let handlers = Counter()
            task.resume()
            let expected = try await withTimeout(30, "round \(round)") { () -> [String] in
                var sent: [String] = []
                for i in 0..<1000 {
                    switch i % 3 {
                    case 0:
                        task.send(.string("m\(i)")) { error in XCTAssertNil(error); handlers.add(i) }
                        sent.append("m\(i)")
                    case 1:
                        try await task.send(.string("m\(i)"))
                        sent.append("m\(i)")
                    default:
                        task.sendPing { error in XCTAssertNil(error); handlers.add(i) }
                    }
                }
                return sent
            }
            try await eventually("every handler ran") { handlers.count == 667 }
            task.cancel(with: .normalClosure, reason: nil)
            let record = try peer.record(1, as: Record.self, timeout: 5)
            XCTAssertTrue(record.texts == expected, "round \(round): out of order at \(Array(zip(record.texts, expected)).firstIndex { $0.0 != $0.1 } ?? -1)")
            // The last Ping is the close's (it follows the messages sent before it).
            XCTAssertEqual(record.pattern, String(repeating: "mmp", count: 333) + "mp", "round \(round)")
            XCTAssertEqual(record.close?.code, 1000)
            // A send completes when its bytes were written, a ping when its Pong came: each
            // kind in call order.
            XCTAssertTrue(handlers.ordered.filter { $0 % 3 == 0 } == (0..<1000).filter { $0 % 3 == 0 }, "send handlers out of order")
            XCTAssertTrue(handlers.ordered.filter { $0 % 3 == 2 } == (0..<1000).filter { $0 % 3 == 2 }, "ping handlers out of order")
        }
    }

    /// The same through WSKit: sends and pings from one task, in call order.
    func testWSKitSendsAndPingsFromOneTaskArriveInCallOrder() async throws {
        let peer = try rawPeer()
        let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(peer.port)/")
        try await withTimeout(30) {
            for i in 0..<1000 {
                if i % 3 == 2 { _ = try await ws.ping() } else { try await ws.send(.text("m\(i)")) }
            }
            try await ws.close()
        }
        let record = try peer.record(1, as: Record.self, timeout: 5)
        XCTAssertTrue(record.texts == (0..<1000).filter { $0 % 3 != 2 }.map { "m\($0)" })
        XCTAssertEqual(record.pattern, String(repeating: "mmp", count: 333) + "mp")
    }

    // MARK: - Cancel

    /// Handlers of every form, each counted.
    private func callEveryForm(_ task: WebSocketTask, _ calls: Counter) {
        task.send(.string("a")) { _ in calls.add(0) }
        task.sendPing { _ in calls.add(1) }
        task.receive { _ in calls.add(2) }
        Task {
            _ = try? await task.receive()
            calls.add(3)
        }
    }

    private func assertEveryHandlerRanOnce(_ calls: Counter, _ what: String) async throws {
        try await eventually("\(what): every handler ran") { calls.count >= 4 }
        try await Task.sleep(for: .milliseconds(200))
        XCTAssertEqual(calls.ordered.sorted(), [0, 1, 2, 3], what)
    }

    func testCancelBeforeResumeEndsTheTaskAndFailsEveryCall() async throws {
        let peer = try rawPeer()
        let task = WebSocketTask(with: url(peer))
        let calls = Counter()
        callEveryForm(task, calls)
        XCTAssertEqual(task.state, .suspended)
        task.cancel(with: .goingAway, reason: nil)
        try await assertEveryHandlerRanOnce(calls, "before resume")
        XCTAssertEqual(task.state, .completed)
        XCTAssertEqual(task.error as? WebSocketError, .cancelled)
        task.resume()  // does nothing now
        try await Task.sleep(for: .milliseconds(300))
        XCTAssertEqual(task.state, .completed)
        XCTAssertNil(peer.process.stdout.waitForLine(startingWith: "RECORDED", timeout: 0.1), "a connection was made")
    }

    /// The connect finished after the cancel and the socket was kept: the server saw the
    /// connection until the process exited.
    func testCancelWhileConnectingClosesWhatOpens() async throws {
        for delay in [0.0, 0.3] {
            let peer = try rawPeer(handshakeDelay: delay)
            let task = WebSocketTask(with: url(peer))
            let calls = Counter()
            task.resume()
            callEveryForm(task, calls)
            XCTAssertEqual(task.state, .running)
            let start = ContinuousClock.now
            task.cancel(with: .goingAway, reason: nil)
            XCTAssertEqual(task.state, .canceling)
            XCTAssertNotNil(peer.process.stdout.waitForLine(startingWith: "RECORDED 1", timeout: delay + 1),
                            "the connection stayed open (handshake delay \(delay) s)")
            XCTAssertLessThan(ContinuousClock.now - start, .seconds(delay + 1))
            try await assertEveryHandlerRanOnce(calls, "connecting")
            try await eventually("completed") { task.state == .completed }
            XCTAssertEqual(task.error as? WebSocketError, .cancelled)
        }
    }

    func testCancelWhileOpenSendsTheCloseAfterTheCallsBeforeIt() async throws {
        let peer = try rawPeer()
        let task = WebSocketTask(with: url(peer))
        task.resume()
        try await withTimeout(10) { try await task.send(.string("first")) }
        let calls = Counter()
        callEveryForm(task, calls)
        task.cancel(with: .other(4001), reason: Data("done".utf8))
        XCTAssertEqual(task.closeCode, .other(4001), "our own code, as Apple's task")
        XCTAssertEqual(task.closeReason, Data("done".utf8))
        let record = try peer.record(1, as: Record.self, timeout: 1)
        XCTAssertEqual(record.texts, ["first", "a"])
        XCTAssertEqual(record.close?.code, 4001)
        XCTAssertEqual(record.close?.reason, "done")
        try await assertEveryHandlerRanOnce(calls, "open")
        try await eventually("completed") { task.state == .completed }
        XCTAssertNil(task.error)
    }

    func testCancelWhileClosingChangesNothingAndEveryHandlerRunsOnce() async throws {
        let peer = try rawPeer()
        let task = WebSocketTask(with: url(peer))
        task.resume()
        try await withTimeout(10) { try await task.send(.string("first")) }
        task.cancel(with: .normalClosure, reason: nil)
        let calls = Counter()
        callEveryForm(task, calls)
        task.cancel()  // closing already: the first code stands
        XCTAssertEqual(task.state, .canceling)
        let record = try peer.record(1, as: Record.self, timeout: 1)
        XCTAssertEqual(record.close?.code, 1000)
        XCTAssertEqual(record.texts, ["first"])
        try await assertEveryHandlerRanOnce(calls, "closing")
        try await eventually("completed") { task.state == .completed }
        XCTAssertEqual(task.closeCode, .normalClosure)
    }

    /// WSKit: cancelling the task that connects ends the connection as soon as it opens.
    func testWSKitCancelWhileConnectingLeavesNothingOpen() async throws {
        let peer = try rawPeer(handshakeDelay: 0.3)
        let address = "ws://127.0.0.1:\(peer.port)/"
        let connecting = Task { try await WebSocket.connect(to: address) }
        try await Task.sleep(for: .milliseconds(50))
        connecting.cancel()
        let result = await connecting.result
        XCTAssertThrowsError(try result.get()) { XCTAssertEqual($0 as? WebSocketError, .cancelled) }
        XCTAssertNotNil(peer.process.stdout.waitForLine(startingWith: "RECORDED 1", timeout: 1.3), "the connection stayed open")
    }

    /// A server that never answers the handshake: the cancel ends the wait for its answer
    /// (it lasted until the connect timeout, 10 s) and closes the socket, with WSKit's
    /// connect and with the task.
    func testCancelWhileTheHandshakeIsUnansweredClosesTheSocketAtOnce() async throws {
        let silent = try LoopbackSocket(listening: true)
        let address = "ws://127.0.0.1:\(silent.port)/"
        let connecting = Task { try await WebSocket.connect(to: address) }
        let client = try XCTUnwrap(acceptRaw(silent, timeout: 5), "no connection came")
        connecting.cancel()
        XCTAssertTrue(closedByPeer(client, within: 1), "WSKit: the socket stayed open after the cancel")
        let result = await connecting.result
        XCTAssertThrowsError(try result.get()) { XCTAssertEqual($0 as? WebSocketError, .cancelled) }
        close(client)

        let task = WebSocketTask(with: URL(string: address)!)
        let calls = Counter()
        task.resume()
        callEveryForm(task, calls)
        let second = try XCTUnwrap(acceptRaw(silent, timeout: 5), "no connection came")
        task.cancel()
        XCTAssertTrue(closedByPeer(second, within: 1), "WebSocketTask: the socket stayed open after the cancel")
        close(second)
        try await assertEveryHandlerRanOnce(calls, "an unanswered handshake")
        try await eventually("completed") { task.state == .completed }
    }

    /// The peer's Close came (the socket refuses pings) but the connection is not over yet:
    /// a ping is refused at once, inside the task's lock, and its handler took that lock
    /// again ("Recursive call to lock Mutex", the process died).
    func testAPingRefusedWhileThePeerClosesFailsItsHandler() async throws {
        let peer = try rawScenario("close-keep-open")
        let task = WebSocketTask(with: url(peer))
        task.resume()
        let pinged = Counter()
        // Pings every 5 ms across the window in which the peer's Close has come and the
        // connection is not over (close-keep-open keeps TCP open: about a second).
        try await withTimeout(10, "the pings") {
            for i in 0..<300 {
                task.sendPing { _ in pinged.add(i) }
                try await Task.sleep(for: .milliseconds(5))
            }
            try await eventually("every ping handler ran") { pinged.count == 300 }
        }
        XCTAssertEqual(pinged.ordered.sorted(), Array(0..<300))
    }

    // MARK: - Delegate, lifetime

    final class Recorder: WebSocketTaskDelegate, @unchecked Sendable {
        let lock = NSLock()
        var calls: [String] = []
        var queues: [OperationQueue?] = []
        func note(_ call: String) { lock.withLock { calls.append(call); queues.append(OperationQueue.current) } }
        func webSocketTask(_ task: WebSocketTask, didOpenWithProtocol protocol: String?) { note("open \(`protocol` ?? "-")") }
        func webSocketTask(_ task: WebSocketTask, didCloseWith closeCode: WebSocketTask.CloseCode, reason: Data?) {
            note("close \(closeCode.rawValue) \(String(decoding: reason ?? Data(), as: UTF8.self))")
        }
        func webSocketTask(_ task: WebSocketTask, didCompleteWithError error: (any Error)?) {
            note("complete \(error.map { "\($0)" } ?? "-")")
        }
    }

    func testTheDelegateHearsOpenCloseAndCompletionOnItsQueueAndIsReleasedAfter() async throws {
        let peer = try echoPeer(["--subprotocols", "chat.v1"])
        let queue = OperationQueue()
        var recorder: Recorder? = Recorder()
        weak let held = recorder
        let task = WebSocketTask(with: url(peer), protocols: ["chat.v1"], delegate: recorder, delegateQueue: queue)
        let seen = recorder
        recorder = nil
        task.resume()
        let echo = try await withTimeout(10) { () -> WebSocketTask.Message in
            try await task.send(.string("hi"))
            return try await task.receive()
        }
        XCTAssertEqual(echo, .string("hi"))
        task.cancel(with: .goingAway, reason: Data("bye".utf8))
        try await eventually("completed") { seen?.lock.withLock { seen?.calls.count ?? 0 } == 3 }
        XCTAssertEqual(seen?.calls, ["open chat.v1", "close 1001 bye", "complete -"])
        XCTAssertTrue(seen?.queues.allSatisfy { $0 === queue } ?? false)
        XCTAssertEqual(task.state, .completed)
        _ = seen
    }

    func testARunningTaskNobodyHoldsKeepsRunning() async throws {
        let peer = try echoPeer()
        let replies = Counter()
        do {
            let task = WebSocketTask(with: url(peer))
            task.resume()
            task.send(.string("x")) { _ in }
            task.receive { result in if case .success = result { replies.add(1) } }
        }
        try await eventually("the reply came to a task nobody holds") { replies.count == 1 }
    }

    // MARK: - Errors

    private func failure(_ task: WebSocketTask) async throws -> any Error {
        try await withTimeout(15) { () -> any Error in
            do {
                _ = try await task.receive()
                XCTFail("received")
                return WebSocketError.cancelled
            } catch {
                return error
            }
        }
    }

    func testLocalizedDescriptionsNameWhatHappened() async throws {
        let refused = try LoopbackSocket(listening: false)
        let refusedTask = WebSocketTask(with: URL(string: "ws://127.0.0.1:\(refused.port)/")!)
        refusedTask.resume()
        var error = try await failure(refusedTask)
        XCTAssertEqual(error.localizedDescription, "\(error)")
        XCTAssertTrue(error.localizedDescription.contains("refused"), error.localizedDescription)

        let unauthorized = try rawScenario("reject-401")
        let rejected = WebSocketTask(with: url(unauthorized))
        rejected.resume()
        error = try await failure(rejected)
        XCTAssertEqual(error.localizedDescription, "\(error)")
        XCTAssertTrue(error.localizedDescription.contains("401"), error.localizedDescription)

        let tls = try TLSMaterial.shared()
        let secure = try echoPeer(["--tls", tls.serverCert, tls.serverKey])
        let untrusted = WebSocketTask(with: url(secure, "wss", host: "localhost"))
        untrusted.resume()
        error = try await failure(untrusted)
        XCTAssertEqual(error.localizedDescription, "\(error)")
        XCTAssertTrue(error.localizedDescription.contains("TLS"), error.localizedDescription)
        XCTAssertTrue(error.localizedDescription.contains("certificate"), error.localizedDescription)

        let closing = try Peer.launch(executable: Locations.python,
                                      arguments: ["\(Locations.peers)/frames.py", "--port", "0", "--record", directory + "/4000.json",
                                                  "--close-code", "4000", "--close-reason", "maintenance"],
                                      environment: Locations.baseEnvironment)
        peers.append(closing)
        let closed = WebSocketTask(with: url(closing))
        closed.resume()
        error = try await failure(closed)
        XCTAssertEqual(error.localizedDescription, "\(error)")
        XCTAssertTrue(error.localizedDescription.contains("4000 maintenance"), error.localizedDescription)
        XCTAssertEqual(closed.closeCode, .other(4000))
        XCTAssertFalse(error.localizedDescription.contains("The operation could not be completed"))
    }
}

/// Calls noted from any thread, in the order they happened.
final class Counter: Sendable {
    private let calls = Mutex<[Int]>([])
    func add(_ call: Int) { calls.withLock { $0.append(call) } }
    var count: Int { calls.withLock { $0.count } }
    var ordered: [Int] { calls.withLock { $0 } }
}

/// Accepts a connection from `listener`'s backlog (nil if none came within `timeout`).
func acceptRaw(_ listener: LoopbackSocket, timeout: Double) -> Int32? {
    var entry = pollfd(fd: listener.fd, events: Int16(POLLIN), revents: 0)
    guard poll(&entry, 1, Int32(timeout * 1000)) > 0 else { return nil }
    let fd = accept(listener.fd, nil, nil)
    return fd >= 0 ? fd : nil
}

/// Reads `fd` until the peer closes it (true), or `seconds` pass (false).
func closedByPeer(_ fd: Int32, within seconds: Double) -> Bool {
    let end = monotonicSeconds() + seconds
    var buffer = [UInt8](repeating: 0, count: 4096)
    while monotonicSeconds() < end {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&entry, 1, Int32(max(1, (end - monotonicSeconds()) * 1000))) > 0 else { continue }
        if read(fd, &buffer, buffer.count) <= 0 { return true }
    }
    return false
}

/// Waits (at most `seconds`) until `condition` holds.
func eventually(_ what: String, within seconds: Double = 5, _ condition: @Sendable () -> Bool) async throws {
    let end = ContinuousClock.now + .seconds(seconds)
    while !condition() {
        if ContinuousClock.now > end { throw HarnessError("\(what): not within \(seconds) s") }
        try await Task.sleep(for: .milliseconds(10))
    }
}
