import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
import TestSupport
import WSKit
import WSKitFoundation

/// Cancelling WSKit's connect and `WebSocketTask` at every moment of the opening, each
/// against a peer that stalls there (stall.py; a full backlog for the TCP connect): the
/// cancel returns at once, the peer sees the connection end soon after, the task tells its
/// delegate and handlers as `URLSessionWebSocketTask` would, and a connection whose 101
/// came gets a Close with the cancel's code before TCP closes.
final class CancelAtAnyMomentTests: XCTestCase {
    private var peers: [Peer] = []
    /// A cancel returns, and a cancelled connect ends, within this.
    private let prompt: Duration = .milliseconds(500)

    override func tearDown() {
        for peer in peers { peer.process.kill() }
    }

    private func launch(_ script: String, _ arguments: [String] = []) throws -> Peer {
        let peer = try Peer.launch(executable: Locations.python, arguments: ["\(Locations.peers)/\(script)", "--port", "0"] + arguments,
                                   environment: Locations.baseEnvironment)
        peers.append(peer)
        return peer
    }

    // MARK: - Issue 34

    /// A task from a request with an Authorization header, cancelled right after `resume()`
    /// (and up to 20 ms after): every connection the server (Python `websockets` at its
    /// defaults) saw open ends at once, with the cancel's 1001 once the client had the 101.
    /// A cancel that came while the 101 was on its way ends the connection without a Close
    /// (1006 at the server: the client never saw it open); no connection stays open.
    func testCancelRightAfterResumeClosesWhatTheServerSawOpenWithTheCode() async throws {
        let peer = try launch("lifecycle.py")
        let delays = [0, 0, 0, 100, 300, 500, 1000, 1500, 2000, 3000, 5000, 8000, 12000, 20000]
        for delay in delays {
            var request = URLRequest(url: URL(string: "ws://127.0.0.1:\(peer.port)/")!)
            request.setValue("Bearer secret", forHTTPHeaderField: "Authorization")
            let task = WebSocketTask(with: request)
            task.resume()
            if delay > 0 { usleep(useconds_t(delay)) }
            task.cancel(with: .goingAway, reason: nil)
            try await eventually("completed (cancelled \(delay) µs after resume)") { task.state == .completed }
        }
        try await Task.sleep(for: .milliseconds(300))
        let lines = peer.process.stdout.text.split(separator: "\n")
        let opened = lines.filter { $0.hasPrefix("OPEN ") }.count
        let output = peer.process.stdout
        try await eventually("the server saw every connection it opened end", within: 3) {
            output.text.split(separator: "\n").filter { $0.hasPrefix("CLOSED ") }.count >= opened
        }
        let closed = peer.process.stdout.text.split(separator: "\n").filter { $0.hasPrefix("CLOSED ") }
        print("issue 34: \(delays.count) cancels, the server saw \(opened) open: \(closed.joined(separator: "; "))")
        for line in closed {
            let fields = line.split(separator: " ")
            XCTAssertTrue(["1001", "1006"].contains(String(fields[2])), String(line))
            XCTAssertLessThan(Double(fields[3]) ?? .infinity, 0.5, "open for longer than the cancel's delay allows: \(line)")
        }
    }

    // MARK: - The phases

    func testCancelDuringTheTCPConnect() async throws {
        let backlog = try FullBacklog()
        let address = "ws://127.0.0.1:\(backlog.port)/"
        // The first connect of the process starts the engine thread and a connect thread:
        // descriptors are counted after it.
        _ = try await cancelConnect(address, stalling: nil)
        let before = CancelAtAnyMomentTests.openDescriptors()
        let took = try await cancelConnect(address, stalling: nil)
        let task = try await cancelTask(address, stalling: nil)
        try await eventually("every descriptor closed") { CancelAtAnyMomentTests.openDescriptors() <= before }
        print("TCP connect: WSKit cancel \(took), task completed \(task)")
    }

    func testCancelDuringTheTLSHandshake() async throws {
        let wskitPeer = try launch("stall.py", ["--phase", "tls"])
        let took = try await cancelConnect("wss://127.0.0.1:\(wskitPeer.port)/", stalling: wskitPeer)
        let seen = try peerEnd(wskitPeer)
        let taskPeer = try launch("stall.py", ["--phase", "tls"])
        let task = try await cancelTask("wss://127.0.0.1:\(taskPeer.port)/", stalling: taskPeer)
        print("TLS: WSKit cancel \(took), peer EOF \(seen) s; task completed \(task), peer EOF \(try peerEnd(taskPeer)) s")
    }

    func testCancelWithTheRequestSentAndNo101() async throws {
        let wskitPeer = try launch("stall.py", ["--phase", "request"])
        let took = try await cancelConnect("ws://127.0.0.1:\(wskitPeer.port)/", stalling: wskitPeer)
        let seen = try peerEnd(wskitPeer)
        let taskPeer = try launch("stall.py", ["--phase", "request"])
        let task = try await cancelTask("ws://127.0.0.1:\(taskPeer.port)/", stalling: taskPeer)
        print("no 101: WSKit cancel \(took), peer EOF \(seen) s; task completed \(task), peer EOF \(try peerEnd(taskPeer)) s")
    }

    /// The 101 came and nothing was read yet; the server answers Pings and echoes the
    /// Close (it sends no message): the Close with the task's code goes at once.
    func testCancelWithThe101ReceivedBeforeTheFirstRead() async throws {
        let peer = try launch("stall.py", ["--phase", "open", "--answer"])
        let recorder = WebSocketTaskTests.Recorder()
        let task = WebSocketTask(with: URL(string: "ws://127.0.0.1:\(peer.port)/")!, delegate: recorder)
        task.resume()
        try await eventually("opened") { recorder.lock.withLock { recorder.calls == ["open -"] } }
        let start = ContinuousClock.now
        task.cancel(with: .other(4001), reason: Data("bye".utf8))
        let returned = ContinuousClock.now - start
        XCTAssertLessThan(returned, prompt)
        let close = try XCTUnwrap(peer.process.stdout.waitForLine(startingWith: "CLOSE ", timeout: 1), "no Close came")
        XCTAssertTrue(close.hasPrefix("CLOSE 4001 ") && close.hasSuffix(" bye"), close)
        let seen = try peerEnd(peer)
        try await eventually("completed", within: 1) { task.state == .completed }
        try await eventually("the delegate heard the end") { recorder.lock.withLock { recorder.calls.count == 3 } }
        XCTAssertEqual(recorder.lock.withLock { recorder.calls }, ["open -", "close 4001 bye", "complete -"])
        print("101 received, task: cancel returned in \(returned); peer: \(close), EOF \(seen) s")
    }

    /// As above with a server that answers nothing (no Pong, no Close): the Close still goes
    /// before TCP closes, within the close timeout (WSKit: the task awaiting the first
    /// message is cancelled, close timeout 1 s).
    func testCancelWithThe101ReceivedAndAServerThatAnswersNothing() async throws {
        let peer = try launch("stall.py", ["--phase", "open"])
        var options = WebSocketOptions()
        options.closeTimeout = .seconds(1)
        let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(peer.port)/", options: options)
        XCTAssertNotNil(peer.process.stdout.waitForLine(startingWith: "STALLED", timeout: 5))
        let reading = Task { for try await _ in ws.messages {} }
        try await Task.sleep(for: .milliseconds(100))
        reading.cancel()
        let close = try XCTUnwrap(peer.process.stdout.waitForLine(startingWith: "CLOSE ", timeout: 1), "no Close came")
        XCTAssertTrue(close.hasPrefix("CLOSE 1001 "), close)
        let seen = try peerEnd(peer, within: 2)
        XCTAssertLessThan(seen, 1.5)
        print("101 received, WSKit: peer \(close), EOF \(seen) s")
    }

    // MARK: - Issue 35, item 10

    /// A ping issued before the cancel gets its Pong (it goes before the Close); one issued
    /// while connecting never went out and fails with `.cancelled`.
    func testAPingBeforeTheCancelGetsItsPong() async throws {
        let peer = try launch("stall.py", ["--phase", "open", "--answer"])
        let recorder = WebSocketTaskTests.Recorder()
        let task = WebSocketTask(with: URL(string: "ws://127.0.0.1:\(peer.port)/")!, delegate: recorder)
        task.resume()
        try await eventually("opened") { recorder.lock.withLock { recorder.calls == ["open -"] } }
        let pong = Outcome()
        task.sendPing { pong.set($0) }
        task.cancel(with: .normalClosure, reason: nil)
        try await eventually("the ping's handler ran") { pong.value != nil }
        XCTAssertEqual(pong.value, "nil", "the ping sent before the cancel got no Pong")
        XCTAssertNotNil(peer.process.stdout.waitForLine(startingWith: "CLOSE 1000", timeout: 1))

        let connecting = try launch("stall.py", ["--phase", "request"])
        let early = WebSocketTask(with: URL(string: "ws://127.0.0.1:\(connecting.port)/")!)
        let refused = Outcome()
        early.resume()
        early.sendPing { refused.set($0) }
        XCTAssertNotNil(connecting.process.stdout.waitForLine(startingWith: "STALLED", timeout: 5))
        early.cancel(with: .normalClosure, reason: nil)
        try await eventually("the early ping's handler ran") { refused.value != nil }
        XCTAssertEqual(refused.value, "\(WebSocketError.cancelled)")
    }

    // MARK: - Helpers

    /// Cancels a WSKit connect to `address` once `peer` stalls (200 ms in without a peer):
    /// how long the cancelled connect took to throw `.cancelled`.
    private func cancelConnect(_ address: String, stalling peer: Peer?) async throws -> Duration {
        let connecting = Task { try await WebSocket.connect(to: address) }
        try await stalled(peer)
        let start = ContinuousClock.now
        connecting.cancel()
        let result = await connecting.result
        let took = ContinuousClock.now - start
        XCTAssertThrowsError(try result.get()) { XCTAssertEqual($0 as? WebSocketError, .cancelled) }
        XCTAssertLessThan(took, prompt, "WSKit's cancelled connect")
        return took
    }

    /// Cancels a task connecting to `address` once `peer` stalls (200 ms in without a peer),
    /// with a call of every form waiting: each fails with `.cancelled`, the delegate hears
    /// only the completion. How long until the task completed.
    private func cancelTask(_ address: String, stalling peer: Peer?) async throws -> Duration {
        let recorder = WebSocketTaskTests.Recorder()
        let task = WebSocketTask(with: URL(string: address)!, delegate: recorder)
        let outcomes = (0..<3).map { _ in Outcome() }
        task.resume()
        task.send(.string("a")) { outcomes[0].set($0) }
        task.sendPing { outcomes[1].set($0) }
        task.receive { result in
            if case .failure(let error) = result { outcomes[2].set(error) } else { outcomes[2].set(nil) }
        }
        try await stalled(peer)
        let start = ContinuousClock.now
        task.cancel(with: .goingAway, reason: nil)
        XCTAssertLessThan(ContinuousClock.now - start, prompt, "cancel(with:reason:) returned late")
        try await eventually("completed", within: 1) { task.state == .completed }
        let took = ContinuousClock.now - start
        XCTAssertLessThan(took, prompt, "the cancelled task completed late")
        XCTAssertEqual(task.error as? WebSocketError, .cancelled)
        try await eventually("every handler ran") { outcomes.allSatisfy { $0.value != nil } }
        XCTAssertEqual(outcomes.map(\.value), Array(repeating: "\(WebSocketError.cancelled)", count: 3))
        try await eventually("the delegate heard the completion") { recorder.lock.withLock { !recorder.calls.isEmpty } }
        XCTAssertEqual(recorder.lock.withLock { recorder.calls }, ["complete \(WebSocketError.cancelled)"])
        return took
    }

    private func stalled(_ peer: Peer?) async throws {
        guard let peer else { return try await Task.sleep(for: .milliseconds(200)) }
        XCTAssertNotNil(peer.process.stdout.waitForLine(startingWith: "STALLED", timeout: 5), "the client never reached the phase")
    }

    /// Seconds from the stall until the peer saw the connection end.
    private func peerEnd(_ peer: Peer, within seconds: Double = 1) throws -> Double {
        let line = try XCTUnwrap(peer.process.stdout.waitForLine(startingWith: "EOF ", timeout: seconds),
                                 "the peer did not see the connection end within \(seconds) s")
        return Double(line.dropFirst(4)) ?? .infinity
    }

    private static func openDescriptors() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
    }
}

/// What a completion handler was called with ("nil", or the error's description), once.
final class Outcome: Sendable {
    private let stored = Mutex<String?>(nil)
    var value: String? { stored.withLock { $0 } }
    func set(_ error: (any Error)?) { stored.withLock { $0 = $0 ?? error.map { "\($0)" } ?? "nil" } }
}
