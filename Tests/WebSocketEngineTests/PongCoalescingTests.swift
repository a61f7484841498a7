import EngineTestSupport
import Glibc
import WebSocketCore
import WebSocketEngine
import WebSocketTransport
import XCTest

/// Pongs while the peer does not read (RFC 6455 §5.5.3): at most one waits unwritten in the
/// queue, later ones replace each other; a peer that reads gets every ping answered.
extension ConnectionDriverTests {
    func testPingsFromAPeerThatDoesNotReadGetOnePongWaitingNotOneEach() {
        let (a, b) = streamPair()
        let log = Recorder()
        let server = ConnectionDriver(loop: loop, stream: b, core: WebSocketConnection(role: .server), delegate: log)
        server.start()
        // Fill the socket with data the peer does not read.
        let chunk = [UInt8](repeating: 0x61, count: 64 * 1024)
        for _ in 0..<8 { server.send(.binary, bytes: chunk) }
        spin(0.2) { false }
        XCTAssertGreaterThan(server.queuedBytes, 0, "the socket took everything: nothing is tested")

        var keys = MaskingKeyGenerator.fixed(MaskingKey(1, 2, 3, 4))
        var pings: [UInt8] = []
        for i in 0..<1000 { pings += FrameEncoder.frame(opcode: .ping, payload: index(i), maskingKey: keys.next()) }
        var offset = 0
        XCTAssertTrue(spin(5) {
            let n = pings.withUnsafeBytes { write(a.fileDescriptor, $0.baseAddress! + offset, $0.count - offset) }
            if n > 0 { offset += n }
            return log.pings.count == 1000
        })

        // The peer reads at last: the data, the pong that was queued, and the latest one.
        var peer = WebSocketConnection(role: .client)
        var pending: [UInt8] = []
        var pongs: [[UInt8]] = []
        var messages = 0
        XCTAssertTrue(spin(5) {
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = read(a.fileDescriptor, &buffer, buffer.count)
                guard n > 0 else { break }
                pending += buffer[0..<n]
            }
            var consumed = 0
            pending.withUnsafeMutableBytes { input in
                while let event = try? peer.receive(input, &consumed) {
                    switch event {
                    case .pong(let payload): pongs.append(payload)
                    case .messageEnd: messages += 1
                    default: break
                    }
                }
            }
            pending.removeFirst(consumed)
            return messages == 8 && pongs.last == index(999)
        }, "pongs \(pongs.count), messages \(messages)")
        XCTAssertLessThanOrEqual(pongs.count, 2, "one pong per ping piled up: \(pongs.count)")
        XCTAssertEqual(pongs.last, index(999), "the most recent ping is answered")
    }

    func testABurstOfPingsFromAPeerThatReadsIsAnsweredInFull() {
        let (a, b) = streamPair()
        let log = Recorder()
        let server = ConnectionDriver(loop: loop, stream: b, core: WebSocketConnection(role: .server), delegate: log)
        server.start()
        var keys = MaskingKeyGenerator.fixed(MaskingKey(1, 2, 3, 4))
        var pings: [UInt8] = []
        for i in 0..<10 { pings += FrameEncoder.frame(opcode: .ping, payload: index(i), maskingKey: keys.next()) }
        XCTAssertEqual(write(a.fileDescriptor, pings, pings.count), pings.count)  // one read for the driver
        var received: [UInt8] = []
        XCTAssertTrue(spin {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let n = read(a.fileDescriptor, &buffer, buffer.count)
            if n > 0 { received += buffer[0..<n] }
            return received.count >= 10 * 10
        })
        var expected: [UInt8] = []
        for i in 0..<10 { expected += FrameEncoder.frame(opcode: .pong, payload: index(i), maskingKey: nil) }
        XCTAssertEqual(received, expected, "every ping of a burst gets its pong, in order")
        _ = server
    }

    func testTheQueueKnowsWhetherItsPongHasLeft() {
        let (a, b) = streamPair()
        var queue = OutboundQueue()
        XCTAssertFalse(queue.holdsUnwrittenPong)
        queue.appendControl(FrameEncoder.frame(opcode: .ping, payload: [1], maskingKey: nil), carryingPong: false)
        XCTAssertFalse(queue.holdsUnwrittenPong, "a ping is no pong")
        queue.appendControl(FrameEncoder.frame(opcode: .pong, payload: [2], maskingKey: nil), carryingPong: true)
        XCTAssertTrue(queue.holdsUnwrittenPong)
        let vectors = UnsafeMutableBufferPointer<iovec>.allocate(capacity: 64)
        defer { vectors.deallocate() }
        XCTAssertEqual(queue.write(to: a, vectors: vectors), .done(0))
        XCTAssertFalse(queue.holdsUnwrittenPong, "written")
        queue.appendControl(FrameEncoder.frame(opcode: .pong, payload: [3], maskingKey: nil), carryingPong: true)
        queue.discard()
        XCTAssertFalse(queue.holdsUnwrittenPong, "discarded with the connection")
        _ = b
    }

    func testTheCoreKeepsOnlyTheMostRecentPongWhenAsked() throws {
        var server = WebSocketConnection(role: .server)
        var keys = MaskingKeyGenerator.fixed(MaskingKey(1, 2, 3, 4))
        var wire: [UInt8] = []
        for i in 0..<5 { wire += FrameEncoder.frame(opcode: .ping, payload: index(i), maskingKey: keys.next()) }
        var offset = 0
        try wire.withUnsafeMutableBytes { input in
            while try server.receive(input, &offset) != nil {}
        }
        XCTAssertTrue(server.hasPendingPong)
        server.keepOnlyMostRecentPong()
        XCTAssertEqual(server.takeOutboundControl(), FrameEncoder.frame(opcode: .pong, payload: index(4), maskingKey: nil),
                       "§5.5.3: only the most recent ping is answered")
        XCTAssertFalse(server.hasPendingPong)
    }

    private func index(_ i: Int) -> [UInt8] { withUnsafeBytes(of: UInt64(i).bigEndian) { Array($0) } }
}
