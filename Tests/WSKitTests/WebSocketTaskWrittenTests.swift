import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
import TestSupport
import WSKitFoundation

/// A `WebSocketTask` send completes when its bytes were written to the socket, as
/// `URLSessionWebSocketTask`'s, not when the connection's queue took it.
final class WebSocketTaskWrittenTests: XCTestCase {
    /// A peer that does not read (slow_reader.py, a 16 KiB receive buffer): while it does
    /// not, the bytes of the completed sends fit in what the kernel holds (our socket's send
    /// queue plus the peer's receive queue, from /proc/net/tcp), and fewer than all complete;
    /// once it reads, all complete, in order. With completions at the hand-off to the queue,
    /// the connection's queue (up to 768 KiB) beyond the kernel's bytes completed too.
    func testASendCompletesOnceItsBytesAreWritten() async throws {
        let directory = NSTemporaryDirectory() + "wstask-written-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let go = directory + "/go"
        let peer = try Peer.slowReader(go: go)
        defer { peer.process.kill() }
        let task = WebSocketTask(with: URL(string: "ws://127.0.0.1:\(peer.port)/")!)
        task.resume()
        let completed = Counter()
        let failures = Counter()
        // More than the kernel can hold: its largest send buffer (tcp_wmem's third value)
        // and the peer's receive buffer, in 64 KiB messages, plus some.
        let sendBufferMax = largestSendBuffer()
        let messages = sendBufferMax / 65536 + 16
        let payload = Data(repeating: 0x61, count: 65536)
        for i in 0..<messages {
            task.send(.data(payload)) { error in
                if error != nil { failures.add(i) }
                completed.add(i)
            }
        }
        let stalled = try await settledValue { completed.count }
        let held = kernelHeldBytes(port: peer.port)
        let frame = 65536 + 14  // a client's 64 KiB frame: 2 + 8 length + 4 mask
        XCTAssertGreaterThan(held, 0, "the connection's queues in /proc/net/tcp")
        XCTAssertLessThan(stalled, messages, "not every send completes while the peer does not read")
        XCTAssertLessThanOrEqual(stalled * frame, held,
                                 "\(stalled) sends completed (\(stalled * frame) bytes) while the kernel held \(held)")
        try Data().write(to: URL(fileURLWithPath: go))
        try await eventually("every send completed", within: 20) { completed.count == messages }
        XCTAssertEqual(completed.ordered, Array(0..<messages), "completions in call order")
        XCTAssertEqual(failures.count, 0)
        task.cancel(with: .normalClosure, reason: nil)
    }
}
