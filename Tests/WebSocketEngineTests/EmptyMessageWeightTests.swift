import EngineTestSupport
import Glibc
import WebSocketCore
import WebSocketEngine
import WebSocketTransport
import XCTest

/// Messages waiting unframed weigh their entry as well as their payload, so a flood of
/// empty (or 1-byte) messages to a peer that does not read is bounded as bytes are: with
/// payload bytes alone, `queuedBytes` stayed under the limit however many waited, and an
/// --exec program printing empty lines grew the server by a gigabyte per client.
extension ConnectionDriverTests {
    func testEmptyMessagesWaitingCountTowardsTheQueue() {
        let (a, b) = streamPair()
        let server = ConnectionDriver(loop: loop, stream: b, core: WebSocketConnection(role: .server), delegate: Recorder())
        server.start()
        // Fill the socket and the queue past its limit with data the peer does not read.
        let chunk = [UInt8](repeating: 0x61, count: 64 * 1024)
        for _ in 0..<16 { server.send(.binary, bytes: chunk) }
        loop.spin(0.2) { false }
        let before = server.queuedBytes
        XCTAssertGreaterThan(before, 0, "the socket took everything: nothing is tested")
        for _ in 0..<10_000 { server.send(.text, bytes: []) }
        XCTAssertGreaterThanOrEqual(server.queuedBytes - before, 10_000 * 64, "10,000 empty messages waiting weigh nothing")
        withExtendedLifetime(a) {}
    }

    /// An owner that sends while the queue has room (as --exec reads its program's output
    /// in `connectionHasRoom`) stops after a bounded number of empty messages: a partial
    /// write left the socket queue under the limit with messages waiting unframed, and with
    /// payload bytes alone the owner was told there was room until it stopped by itself.
    func testAnOwnerSendingEmptyMessagesWhileThereIsRoomStops() {
        let (a, b) = streamPair()
        var small: Int32 = 4096
        setsockopt(b.fileDescriptor, SOL_SOCKET, SO_SNDBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        setsockopt(a.fileDescriptor, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        let sender = EmptySender(cap: 2_000_000)
        let server = ConnectionDriver(loop: loop, stream: b, core: WebSocketConnection(role: .server), delegate: sender)
        server.start()
        sender.fill(server)
        // The peer reads a little now and then: each time the socket takes part of the
        // queue and blocks again, and the driver tells its owner whether there is room.
        var scratch = [UInt8](repeating: 0, count: 2048)
        for _ in 0..<40 {
            loop.spin(0.02) { false }
            _ = read(a.fileDescriptor, &scratch, scratch.count)
        }
        XCTAssertLessThan(sender.sent, 500_000, "the queue took \(sender.sent) empty messages (\(server.queuedBytes) bytes queued)")
        withExtendedLifetime(a) {}
    }
}

/// Sends empty text messages while the driver's queue is under its limit, up to about `cap`.
private final class EmptySender: ConnectionDelegate {
    let cap: Int
    private(set) var sent = 0
    init(cap: Int) { self.cap = cap }

    /// A batch per check, as --exec sends every line of one read of its program's output.
    func fill(_ connection: ConnectionDriver) {
        while connection.queuedBytes < connection.options.queueLimit && sent < cap {
            for _ in 0..<4096 { connection.send(.text, bytes: []) }
            sent += 4096
        }
    }

    func connectionHasRoom(_ connection: ConnectionDriver) { fill(connection) }
    func connection(_ connection: ConnectionDriver, didStartMessage kind: MessageKind) {}
    func connection(_ connection: ConnectionDriver, didReceive bytes: UnsafeMutableRawPointer, count: Int, in buffer: ByteBuffer) {}
    func connectionDidEndMessage(_ connection: ConnectionDriver) {}
    func connection(_ connection: ConnectionDriver, didEnd ending: ConnectionEnding) {}
}
