import EngineTestSupport
import Glibc
import WebSocketCore
@testable import WebSocketEngine
import WebSocketTransport
import TestSupport
import XCTest

final class ConnectionDriverTests: XCTestCase {
    var loop: EventLoop!

    override func setUpWithError() throws { loop = try EventLoop() }

    /// Turns the loop until `done` holds or `seconds` pass.
    @discardableResult
    func spin(_ seconds: Double = 3, until done: () -> Bool) -> Bool { loop.spin(seconds, until: done) }

    /// A client-role and a server-role driver over a socketpair.
    func pair(clientOptions: ConnectionOptions = .init(), serverOptions: ConnectionOptions = .init())
        -> (client: ConnectionDriver, clientLog: Recorder, server: ConnectionDriver, serverLog: Recorder) {
        let (a, b) = streamPair()
        let clientLog = Recorder(), serverLog = Recorder()
        let client = ConnectionDriver(loop: loop, stream: a, core: WebSocketConnection(role: .client), options: clientOptions, delegate: clientLog)
        let server = ConnectionDriver(loop: loop, stream: b, core: WebSocketConnection(role: .server), options: serverOptions, delegate: serverLog)
        client.start()
        server.start()
        return (client, clientLog, server, serverLog)
    }

    func testTextBinaryAndFragmentedMessagesBothWays() {
        let (client, clientLog, server, serverLog) = pair()
        client.send(.text, bytes: Array("hello".utf8))
        client.send(.binary, bytes: [0, 1, 2, 0xFF])
        client.send(.text, fin: false, bytes: Array("frag".utf8))
        client.send(.continuation, fin: false, bytes: Array("men".utf8))
        client.send(.continuation, fin: true, bytes: Array("ted é".utf8))
        let big = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        client.send(.binary, bytes: big)
        XCTAssertTrue(spin { serverLog.messages.count == 4 })
        XCTAssertEqual(serverLog.messages.map(\.kind), [.text, .binary, .text, .binary])
        XCTAssertEqual(serverLog.messages[0].text, "hello")
        XCTAssertEqual(serverLog.messages[1].bytes, [0, 1, 2, 0xFF])
        XCTAssertEqual(serverLog.messages[2].text, "fragmented é")
        XCTAssertEqual(serverLog.messages[3].bytes, big, "a masked 300 KB message arrives unmasked and whole")

        server.send(.text, bytes: Array("back".utf8))
        server.send(.binary, bytes: big)
        XCTAssertTrue(spin { clientLog.messages.count == 2 })
        XCTAssertEqual(clientLog.messages[0].text, "back")
        XCTAssertEqual(clientLog.messages[1].bytes, big)
    }

    /// A read full of tiny messages is delivered a turn's budget at a time, so the loop's
    /// other work (stdin, timers, other clients) gets its turn in between; what waits in the
    /// buffer is not lost when the peer's Close comes right behind it.
    func testATurnDeliversABoundedNumberOfMessagesAndLosesNone() {
        let (_, clientLog, server, _) = pair()
        let total = 3 * ConnectionDriver.messagesPerTurn + 100
        for _ in 0..<total { server.send(.text, bytes: [0x79]) }
        server.close(ClosePayload(code: .normalClosure))
        var most = 0
        let deadline = Instant.now().adding(seconds: 10)
        while clientLog.ending == nil && Instant.now() < deadline {
            let before = clientLog.messages.count
            loop.turn()
            most = max(most, clientLog.messages.count - before)
        }
        XCTAssertEqual(clientLog.messages.count, total)
        XCTAssertLessThanOrEqual(most, ConnectionDriver.messagesPerTurn, "messages delivered in one turn")
        XCTAssertEqual(clientLog.closes.first?.code, .normalClosure)
    }

    /// Frames encoded once (a broadcast's batch) go out referenced, in order with the
    /// messages around them, through the waiting queue too (a 1 KiB queue limit), and a
    /// Close asked for after them follows them.
    func testEncodedFramesKeepTheirPlaceAmongMessages() {
        var options = ConnectionOptions()
        options.queueLimit = 1024
        let (_, clientLog, server, _) = pair(serverOptions: options)
        var frames: [UInt8] = []
        for (opcode, payload) in [(Opcode.text, Array("b".utf8)), (.binary, [UInt8](repeating: 7, count: 3000))] {
            let header = FrameHeader(fin: true, opcode: opcode, payloadLength: UInt64(payload.count))
            var encoded = [UInt8](repeating: 0, count: header.encodedSize)
            _ = encoded.withUnsafeMutableBytes { header.encode(into: $0.baseAddress!) }
            frames += encoded + payload
        }
        let batch = ByteBuffer(capacity: frames.count)
        frames.withUnsafeBytes { batch.base.copyMemory(from: $0.baseAddress!, byteCount: frames.count) }
        batch.count = frames.count
        let big = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        server.send(.text, bytes: Array("a".utf8))
        server.sendFrames(batch.base, count: batch.count, in: batch, messages: 2)
        server.send(.binary, bytes: big)
        server.sendFrames(batch.base, count: batch.count, in: batch, messages: 2)  // behind the 200 KB: waits
        server.close(ClosePayload(code: .normalClosure))
        XCTAssertEqual(server.messagesSent, 6)
        XCTAssertTrue(spin { clientLog.ending != nil })
        XCTAssertEqual(clientLog.messages.map(\.kind), [.text, .text, .binary, .binary, .text, .binary])
        XCTAssertEqual(clientLog.messages[0].text, "a")
        XCTAssertEqual(clientLog.messages[1].text, "b")
        XCTAssertEqual(clientLog.messages[2].bytes, [UInt8](repeating: 7, count: 3000))
        XCTAssertEqual(clientLog.messages[3].bytes, big)
        XCTAssertEqual(clientLog.messages[4].text, "b")
        XCTAssertEqual(clientLog.closes.map(\.code), [.normalClosure], "the Close came after the frames")
    }

    /// Consecutive batches of one buffer wait as one run for a client that is behind.
    func testContiguousEncodedFramesWaitAsOneEntry() {
        let buffer = ByteBuffer(capacity: 100)
        var queue = MessageQueue()
        queue.appendEncoded(buffer, buffer.base, count: 10)
        queue.appendEncoded(buffer, buffer.base + 10, count: 20)
        queue.appendEncoded(buffer, buffer.base + 40, count: 5)  // not contiguous
        queue.appendEncoded(ByteBuffer(capacity: 10), buffer.base + 45, count: 5)  // another buffer
        XCTAssertEqual(queue.byteCount, 40)
        var counts: [Int?] = []
        for _ in 0..<4 { counts.append(queue.popFirst()?.count) }
        XCTAssertEqual(counts, [30, 5, 5, nil])
        XCTAssertEqual(queue.byteCount, 0)
    }

    func testAPeerThatGoesWhileReadingIsPausedIsNoticed() {
        let (client, _, server, serverLog) = pair()
        server.pauseReading()
        client.send(.text, bytes: Array("unread".utf8))
        spin(0.1) { false }
        client.abandon()
        XCTAssertTrue(spin { serverLog.shutDownsWhilePaused == 1 }, "a paused driver still sees the hang-up")
        XCTAssertNil(serverLog.ending, "the ending waits for the owner to read again")
        server.resumeReading()
        XCTAssertTrue(spin { serverLog.ending != nil })
        XCTAssertEqual(serverLog.messages.map(\.text), ["unread"], "what came before the hang-up is still delivered")
        XCTAssertEqual(serverLog.shutDownsWhilePaused, 1)
    }

    func testPingPongAndKeepaliveRoundTrip() {
        var options = ConnectionOptions()
        options.pingInterval = 0.05
        let (client, clientLog, _, serverLog) = pair(clientOptions: options)
        XCTAssertTrue(client.ping([1, 2, 3]))
        XCTAssertTrue(spin { serverLog.pings.contains([1, 2, 3]) && clientLog.pongs.contains { $0.payload == [1, 2, 3] } })
        XCTAssertTrue(spin { clientLog.pongs.contains { $0.rtt != nil } }, "a keepalive ping is answered with its round trip")
        XCTAssertNotNil(client.lastRoundTrip)
        XCTAssertTrue(clientLog.notes.contains(.pingQueued(8)))
    }

    func testCloseStartedByTheClient() {
        let (client, clientLog, _, serverLog) = pair()
        client.send(.text, bytes: Array("last".utf8))
        client.close(ClosePayload(code: .normalClosure, reason: Array("done".utf8)))
        XCTAssertTrue(spin { clientLog.ending != nil && serverLog.ending != nil })
        XCTAssertEqual(serverLog.messages.map(\.text), ["last"], "data before the Close arrives")
        XCTAssertEqual(serverLog.closes, [ClosePayload(code: .normalClosure, reason: Array("done".utf8))])
        guard case .closed(let ours)? = clientLog.ending, case .closed(let theirs)? = serverLog.ending else {
            return XCTFail("\(String(describing: clientLog.ending)) \(String(describing: serverLog.ending))")
        }
        XCTAssertTrue(ours.initiatedByUs)
        XCTAssertFalse(theirs.initiatedByUs)
        XCTAssertEqual(ours.received.code, .normalClosure, "the echo")
        XCTAssertTrue(ours.isNormal && theirs.isNormal)
    }

    func testCloseStartedByTheServerWithAnApplicationCode() {
        let (_, clientLog, server, serverLog) = pair()
        server.close(ClosePayload(code: CloseCode(rawValue: 4001), reason: Array("bye".utf8)))
        XCTAssertTrue(spin { clientLog.ending != nil && serverLog.ending != nil })
        guard case .closed(let seen)? = clientLog.ending else { return XCTFail("\(String(describing: clientLog.ending))") }
        XCTAssertFalse(seen.initiatedByUs)
        XCTAssertEqual(seen.received.code?.rawValue, 4001)
        XCTAssertFalse(seen.isNormal, "a code other than 1000 from the peer")
        guard case .closed(let own)? = serverLog.ending else { return XCTFail() }
        XCTAssertTrue(own.isNormal, "the peer echoed our code")
    }

    func testEndAfterDeliveryWaitsForTheBarrierPong() {
        let (client, clientLog, server, serverLog) = pair()
        serverLog.echoes = true
        for i in 0..<100 { client.send(.text, bytes: Array("m\(i)".utf8)) }
        client.closeAfterDelivery(ClosePayload(code: .normalClosure))
        XCTAssertTrue(spin { clientLog.ending != nil && serverLog.ending != nil })
        XCTAssertEqual(clientLog.messages.count, 100, "every echo came back before the Close")
        XCTAssertEqual(clientLog.notes.filter { $0 == .barrierQueued || $0 == .barrierAnswered }, [.barrierQueued, .barrierAnswered])
        XCTAssertEqual(serverLog.pings.count, 1)
        XCTAssertTrue(serverLog.pings[0].starts(with: Array("wspipe:eof:".utf8)))
        _ = server
    }

    /// The peer's Close right behind the barrier's Pong, in the same read, comes before our
    /// Close was handed to the core: the core echoes the peer's code, and the handshake is
    /// the peer's (its 1011 is not "our own code echoed", which counted as a normal ending).
    func testAPeersCloseBehindTheBarrierPongIsTheirsNotOurs() throws {
        let (a, b) = streamPair()
        let log = Recorder()
        let client = ConnectionDriver(loop: loop, stream: a, core: WebSocketConnection(role: .client), delegate: log)
        client.start()
        client.closeAfterDelivery(ClosePayload(code: .normalClosure))
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 512)
        XCTAssertTrue(spin {
            let n = read(b.fileDescriptor, &chunk, chunk.count)
            if n > 0 { bytes += chunk[0..<n] }
            return Wire.readFrame(bytes[...]) != nil
        }, "the barrier ping is written")
        let ping = try XCTUnwrap(Wire.readFrame(bytes[...]))
        XCTAssertEqual(ping.opcode, 0x9)
        var answer: [UInt8] = [0x8A, UInt8(ping.payload.count)] + ping.payload + [0x88, 0x03, 0x03, 0xF3, 0x78]  // Pong, Close 1011 "x"
        XCTAssertEqual(write(b.fileDescriptor, &answer, answer.count), answer.count)
        XCTAssertTrue(spin { log.ending != nil })
        guard case .closed(let handshake)? = log.ending else { return XCTFail("\(String(describing: log.ending))") }
        XCTAssertFalse(handshake.initiatedByUs, "the peer's Close came before ours was sent")
        XCTAssertEqual(handshake.sent?.code, .internalError, "its code echoed")
        XCTAssertFalse(handshake.isNormal, "a 1011 from the peer is no normal ending")
    }

    func testMaskedFrameFromTheServerFailsTheClientWith1002() throws {
        let (a, b) = streamPair()
        let log = Recorder()
        let client = ConnectionDriver(loop: loop, stream: a, core: WebSocketConnection(role: .client), delegate: log)
        client.start()
        // A masked text frame: servers never mask (RFC 6455 §5.1).
        var frame: [UInt8] = [0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58]
        XCTAssertEqual(write(b.fileDescriptor, &frame, frame.count), frame.count)
        XCTAssertTrue(spin { log.ending != nil })
        guard case .failed(let error)? = log.ending else { return XCTFail("\(String(describing: log.ending))") }
        XCTAssertEqual(error.closeCode, .protocolError)
        XCTAssertEqual(try readClose(b), 1002)
    }

    func testUnmaskedFrameFromTheClientFailsTheServerWith1002() throws {
        let (a, b) = streamPair()
        let log = Recorder()
        let server = ConnectionDriver(loop: loop, stream: b, core: WebSocketConnection(role: .server), delegate: log)
        server.start()
        var frame: [UInt8] = [0x81, 0x05] + Array("Hello".utf8)
        XCTAssertEqual(write(a.fileDescriptor, &frame, frame.count), frame.count)
        XCTAssertTrue(spin { log.ending != nil })
        guard case .failed(let error)? = log.ending else { return XCTFail("\(String(describing: log.ending))") }
        XCTAssertEqual(error.closeCode, .protocolError)
        XCTAssertEqual(log.messages, [], "nothing of the bad frame is reported")
        XCTAssertEqual(try readClose(a), 1002)
    }

    func testInvalidUTF8FromTheClientFailsTheServerWith1007() throws {
        let (a, b) = streamPair()
        let log = Recorder()
        let server = ConnectionDriver(loop: loop, stream: b, core: WebSocketConnection(role: .server), delegate: log)
        server.start()
        var keys = MaskingKeyGenerator.fixed(MaskingKey(0x11, 0x22, 0x33, 0x44))
        var frame = FrameEncoder.frame(opcode: .text, payload: [0x61, 0xC3, 0x28], maskingKey: keys.next())
        XCTAssertEqual(write(a.fileDescriptor, &frame, frame.count), frame.count)
        XCTAssertTrue(spin { log.ending != nil })
        guard case .failed(let error)? = log.ending else { return XCTFail("\(String(describing: log.ending))") }
        XCTAssertEqual(error.closeCode, .invalidPayloadData)
        XCTAssertEqual(try readClose(a), 1007)
    }

    func testPeerVanishingIsALoss() {
        let (a, b) = streamPair()
        let log = Recorder()
        let client = ConnectionDriver(loop: loop, stream: a, core: WebSocketConnection(role: .client), delegate: log)
        client.start()
        b.close()
        XCTAssertTrue(spin { log.ending != nil })
        XCTAssertEqual(log.ending, .lost(.peerClosedTCP(afterOurClose: false)))
    }

    func testCloseTimeoutCountsOnlyWithoutProgress() {
        // The peer never reads: once the socket buffers are full nothing moves, and the
        // ending gives up one close timeout after the last progress, not two.
        let (a, b) = streamPair()
        var options = ConnectionOptions()
        options.closeTimeout = 0.4
        let log = Recorder()
        let client = ConnectionDriver(loop: loop, stream: a, core: WebSocketConnection(role: .client), options: options, delegate: log)
        client.start()
        let chunk = [UInt8](repeating: 0x61, count: 64 * 1024)
        for _ in 0..<64 { client.send(.binary, bytes: chunk) }
        spin(0.3) { false }
        let began = Instant.now()
        client.closeAfterDelivery(ClosePayload(code: .normalClosure))
        XCTAssertTrue(spin(5) { log.ending != nil })
        let took = Instant.now().seconds(since: began)
        guard case .timedOut(let wait)? = log.ending else { return XCTFail("\(String(describing: log.ending))") }
        XCTAssertFalse(wait.closeWritten, "the Close never reached the socket")
        XCTAssertEqual(wait.limit, 0.4)
        XCTAssertLessThan(took, 1.2, "one close timeout (plus a little), not one per stage")
        XCTAssertGreaterThan(took, 0.35)
        _ = b
    }

    func testAnUnansweredPingAfterBothClosesDoesNotSpinTheLoop() {
        // Keepalive pings go unanswered; the peer's Close comes before the ping timeout and
        // the client echoes it, then waits (1 s) for the peer to close TCP. The ping's
        // deadline passes during that wait, when it no longer counts: it must not keep the
        // driver's timer in the past (a turn without waiting, thousands of times a second).
        let (a, b) = streamPair()
        var options = ConnectionOptions()
        options.pingInterval = 0.1
        options.pingTimeout = 0.4
        let log = Recorder()
        let client = ConnectionDriver(loop: loop, stream: a, core: WebSocketConnection(role: .client), options: options, delegate: log)
        client.start()
        spin(0.25) { false }
        var close: [UInt8] = [0x88, 0x02, 0x03, 0xE8]
        XCTAssertEqual(write(b.fileDescriptor, &close, close.count), 4)
        let deadline = Instant.now().adding(seconds: 3)
        var turns = 0
        let stopper = loop.timer {}
        while log.ending == nil && Instant.now() < deadline {
            loop.arm(stopper, at: Instant.now().adding(seconds: 0.05))
            loop.turn()
            turns += 1
        }
        guard case .closed(let handshake)? = log.ending else { return XCTFail("\(String(describing: log.ending))") }
        XCTAssertTrue(handshake.isNormal)
        XCTAssertLessThan(turns, 200, "the loop spun while waiting for the peer to close TCP")
        _ = b
    }

    func testBufferedInputThatCannotBeReadYetDoesNotSpinTheLoop() {
        // TLS holds the first bytes of a record that has not fully arrived: the stream has
        // buffered input (SSL_has_pending), yet a read would block until the rest comes.
        // The driver must wait for the socket, not come back every turn.
        final class PartialRecordStream: ByteStream {
            let inner: TCPStream
            init(_ inner: TCPStream) { self.inner = inner }
            var fileDescriptor: Int32 { inner.fileDescriptor }
            func read(into buffer: UnsafeMutableRawPointer, count: Int) -> IOResult { inner.read(into: buffer, count: count) }
            func write(_ vectors: UnsafePointer<iovec>, count: Int) -> IOResult { inner.write(vectors, count: count) }
            var hasBufferedInput: Bool { true }
            var hasPendingOutput: Bool { inner.hasPendingOutput }
            func flush() -> IOResult { inner.flush() }
            func shutdownOutput() { inner.shutdownOutput() }
            func close() { inner.close() }
        }
        let (a, b) = streamPair()
        let log = Recorder()
        let client = ConnectionDriver(loop: loop, stream: PartialRecordStream(a), core: WebSocketConnection(role: .client), delegate: log)
        client.start()
        let deadline = Instant.now().adding(seconds: 0.5)
        var turns = 0
        let stopper = loop.timer {}
        while Instant.now() < deadline {
            loop.arm(stopper, at: Instant.now().adding(seconds: 0.05))
            loop.turn()
            turns += 1
        }
        XCTAssertLessThan(turns, 100, "the driver came back every turn for input it could not read")
        // The rest of the record arrives: it is read.
        var text: [UInt8] = [0x81, 0x02, 0x68, 0x69]
        XCTAssertEqual(write(b.fileDescriptor, &text, text.count), 4)
        XCTAssertTrue(spin(2) { log.messages.count == 1 })
        XCTAssertEqual(log.messages.first?.text, "hi")
        client.abandon()
    }

    func testManyConnectionsOnOneLoopOverTCP() throws {
        let socket = try TCPListener(address: "127.0.0.1", port: 0)
        var servers: [ConnectionDriver] = []
        let serverLog = Recorder()
        serverLog.echoes = true
        let listener = Listener(loop: loop, socket: socket) { [loop] stream in
            let driver = ConnectionDriver(loop: loop!, stream: stream, core: WebSocketConnection(role: .server), delegate: serverLog)
            servers.append(driver)
            driver.start()
        }
        listener.start()
        var clients: [(ConnectionDriver, Recorder)] = []
        for i in 0..<200 {
            let fd = try connectBlocking(port: socket.port)
            let log = Recorder()
            let driver = ConnectionDriver(loop: loop, stream: TCPStream(adopting: fd, remoteAddress: "client \(i)"),
                                          core: WebSocketConnection(role: .client), delegate: log)
            driver.start()
            driver.send(.text, bytes: Array("client \(i)".utf8))
            clients.append((driver, log))
        }
        XCTAssertTrue(spin(10) { clients.allSatisfy { $0.1.messages.count == 1 } })
        for (i, (_, log)) in clients.enumerated() { XCTAssertEqual(log.messages.first?.text, "client \(i)") }
        XCTAssertEqual(servers.count, 200)
        for (driver, _) in clients { driver.close(ClosePayload(code: .normalClosure)) }
        XCTAssertTrue(spin(10) { clients.allSatisfy { $0.1.ending != nil } && servers.allSatisfy { $0.ending != nil } })
        XCTAssertTrue(clients.allSatisfy { if case .closed(let h)? = $0.1.ending { return h.isNormal } else { return false } })
        listener.close()
    }

    func testTimersFireInOrderAndMove() {
        var fired: [Int] = []
        let now = Instant.now()
        let t1 = loop.timer { fired.append(1) }
        let t2 = loop.timer { fired.append(2) }
        let t3 = loop.timer { fired.append(3) }
        loop.arm(t1, at: now.adding(seconds: 0.05))
        loop.arm(t2, at: now.adding(seconds: 0.01))
        loop.arm(t3, at: now.adding(seconds: 0.02))
        loop.arm(t3, at: now.adding(seconds: 0.5))  // moved later
        loop.arm(t3, at: nil)                          // and disarmed
        XCTAssertTrue(spin(2) { fired.count == 2 })
        spin(0.1) { false }
        XCTAssertEqual(fired, [2, 1])
    }

    func testATimerRearmedForThePastDoesNotStarveDescriptors() {
        // A timer that re-arms itself for a moment already past fires once per turn, so
        // descriptors are still looked at (this once hid a peer's Pong for 5 s).
        var fired = 0
        var timer: EventLoop.Timer?
        timer = loop.timer { [loop] in
            fired += 1
            if let timer { loop!.arm(timer, at: Instant(nanoseconds: 1)) }
        }
        loop.arm(timer!, at: Instant(nanoseconds: 1))
        let (a, b) = streamPair()
        var readable = false
        let watch = loop.watch(a.fileDescriptor) { _ in readable = true }
        loop.setInterest(watch, .readable)
        var byte: UInt8 = 0x78
        XCTAssertEqual(write(b.fileDescriptor, &byte, 1), 1)
        XCTAssertTrue(spin(2) { readable })
        XCTAssertGreaterThan(fired, 0)
        loop.arm(timer!, at: nil)
        loop.remove(watch)
    }

    func testAWatchRemovedDuringDispatchNeverGetsItsEventsForANewWatchInItsSlot() {
        // Both pipes are readable, so one epoll_wait reports both. Whichever handler runs
        // first removes the other watch and makes a new one, which takes the freed slot:
        // the removed watch's event, still in this turn's batch, must not reach it.
        var p1: [Int32] = [0, 0], p2: [Int32] = [0, 0], p3: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&p1), 0); XCTAssertEqual(pipe(&p2), 0); XCTAssertEqual(pipe(&p3), 0)
        defer { for fd in p1 + p2 + p3 { close(fd) } }
        var byte: UInt8 = 0x78
        XCTAssertEqual(write(p1[1], &byte, 1), 1)
        XCTAssertEqual(write(p2[1], &byte, 1), 1)
        let loop = self.loop!
        var a: EventLoop.Watch?, b: EventLoop.Watch?, c: EventLoop.Watch?
        var dispatched = 0
        var wrongDispatches = 0
        func first(removing other: EventLoop.Watch?) {
            dispatched += 1
            guard c == nil, let other else { return }
            loop.remove(other)
            c = loop.watch(p3[0]) { _ in wrongDispatches += 1 }  // p3 is empty: never readable
            loop.setInterest(c!, .readable)
        }
        a = loop.watch(p1[0]) { _ in first(removing: b) }
        b = loop.watch(p2[0]) { _ in first(removing: a) }
        loop.setInterest(a!, .readable)
        loop.setInterest(b!, .readable)
        XCTAssertTrue(spin(2) { dispatched > 0 })
        spin(0.05) { false }
        XCTAssertEqual(wrongDispatches, 0, "a removed watch's event went to the watch that took its slot")
        for watch in [a, b, c].compactMap({ $0 }) { loop.remove(watch) }
    }

    func testWakeFromAnotherThread() {
        var woken = 0
        loop.onWake = { woken += 1 }
        let loop = self.loop!
        let thread = Thread { loop.wake() }
        thread.start()
        XCTAssertTrue(spin(2) { woken > 0 })
    }

    // MARK: - The readClose helper (it skipped, trapped on a masked header read in pieces, spun on a short payload)

    /// `bytes` written to `stream` now, and `later` 30 ms on (from a loop timer, so while
    /// readClose turns the loop).
    func feed(_ stream: TCPStream, _ bytes: [UInt8], then later: [UInt8] = []) {
        XCTAssertEqual(bytes.withUnsafeBytes { write(stream.fileDescriptor, $0.baseAddress, $0.count) }, bytes.count)
        guard !later.isEmpty else { return }
        let timer = loop.timer {
            XCTAssertEqual(later.withUnsafeBytes { write(stream.fileDescriptor, $0.baseAddress, $0.count) }, later.count)
        }
        loop.arm(timer, at: Instant.now().adding(seconds: 0.03))
    }

    func testReadCloseWaitsForAMaskedHeaderThatArrivesInPieces() throws {
        let (a, b) = streamPair()
        let frame = Wire.frame(0x8, [0x03, 0xE8] + Array("bye".utf8), mask: [0x11, 0x22, 0x33, 0x44])
        feed(b, Array(frame[..<5]), then: Array(frame[5...]))  // header and 3 of the key's 4 bytes first
        XCTAssertEqual(try readClose(a), 1000)
        let long = Wire.frame(0x8, [0x0F, 0xA1] + [UInt8](repeating: 0x61, count: 300), mask: [9, 8, 7, 6])  // 16-bit length
        feed(b, Array(long[..<3]), then: Array(long[3...]))
        XCTAssertEqual(try readClose(a), 4001)
    }

    func testReadCloseOfAnEmptyPayloadIsNoCode() throws {
        let (a, b) = streamPair()
        feed(b, [0x88, 0x00])
        XCTAssertNil(try readClose(a))
        feed(b, [0x88, 0x80, 1, 2, 3, 4])  // masked, empty
        XCTAssertNil(try readClose(a))
    }

    func testReadCloseFailsRatherThanSkipsWhereNoCodeCanBeRead() {
        func assertFails(_ bytes: [UInt8], endStream: Bool = false, _ what: String) {
            let (a, b) = streamPair()
            feed(b, bytes)
            if endStream { shutdown(b.fileDescriptor, Int32(SHUT_WR)) }
            XCTAssertThrowsError(try readClose(a, seconds: 0.2), what) { error in
                XCTAssertTrue(error is HarnessError, "\(what): \(error) is no failure")
            }
        }
        assertFails([], "nothing written")
        assertFails([0x88, 0x82, 1, 2], "a masked header cut in its key")
        assertFails([0x88, 0x01, 0x03], "a 1-byte payload")
        assertFails(Wire.text("hi"), "a text frame")
        assertFails([0x88, 0x02, 0x03], endStream: true, "the stream ends inside the payload")
    }

    func testWireReadsFramesOfEveryLengthEncodingBackOnlyWhenWhole() {
        for (count, mask) in [(0, nil), (125, [1, 2, 3, 4]), (126, nil), (65_535, [5, 6, 7, 8]), (65_536, nil)] as [(Int, [UInt8]?)] {
            let payload = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            let frame = Wire.frame(0x2, payload, fin: false, mask: mask) + [0x89, 0x00]  // and a Ping behind it
            let read = Wire.readFrame(frame[...])
            XCTAssertEqual(read?.fin, false, "\(count)")
            XCTAssertEqual(read?.opcode, 0x2, "\(count)")
            XCTAssertEqual(read?.masked, mask != nil, "\(count)")
            XCTAssertEqual(read?.payload, payload, "\(count)")
            XCTAssertEqual(read?.size, frame.count - 2, "\(count)")
            for cut in [0, 1, 2, 3, 5, 9, frame.count - 3] where cut < frame.count - 2 {
                XCTAssertNil(Wire.readFrame(frame[..<cut]), "\(count) bytes, \(cut) of the frame")
            }
            XCTAssertEqual(Wire.readFrame(frame[(frame.count - 2)...])?.opcode, 0x9, "a slice not starting at 0")
        }
    }

    // MARK: - Helpers

    /// The code of the Close frame the driver sent on `stream` (masked or not), read while
    /// the loop turns; nil for an empty payload (a Close without a code). No whole frame
    /// within `seconds`, another frame first, or a 1-byte payload throws: a failure.
    func readClose(_ stream: TCPStream, seconds: Double = 2) throws -> Int? {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        var ended = false
        var frame: Wire.ReadFrame?
        spin(seconds) {
            let n = read(stream.fileDescriptor, &buffer, buffer.count)
            if n > 0 { bytes += buffer[0..<n] } else if n == 0 { ended = true }
            frame = Wire.readFrame(bytes[...])
            return frame != nil || ended
        }
        guard let frame else {
            throw HarnessError("no whole frame \(ended ? "before the end of the stream" : "within \(seconds) s"): \(bytes)")
        }
        guard frame.opcode == 0x8 else { throw HarnessError("a frame with opcode \(frame.opcode) where a Close was due: \(bytes)") }
        switch frame.payload.count {
        case 0: return nil
        case 1: throw HarnessError("a Close payload of 1 byte (a code takes 2): \(bytes)")
        default: return Int(frame.payload[0]) << 8 | Int(frame.payload[1])
        }
    }
}

/// A blocking connect to 127.0.0.1:port, returning the descriptor.
func connectBlocking(port: UInt16) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let result = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard result == 0 else {
        let reason = String(cString: strerror(errno))
        close(fd)
        throw HarnessError("connect to 127.0.0.1:\(port): \(reason)")
    }
    return fd
}

/// A minimal thread (no Foundation in the engine's tests' dependencies is needed for this).
final class Thread {
    private let body: () -> Void
    init(_ body: @escaping () -> Void) { self.body = body }
    func start() {
        let box = Unmanaged.passRetained(self)
        var handle = pthread_t()
        pthread_create(&handle, nil, { raw in
            let thread = Unmanaged<Thread>.fromOpaque(raw!).takeRetainedValue()
            thread.body()
            return nil
        }, box.toOpaque())
        pthread_detach(handle)
    }
}
