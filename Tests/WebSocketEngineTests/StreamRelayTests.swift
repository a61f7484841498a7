import EngineTestSupport
import Glibc
import TestSupport
import WebSocketCore
@testable import WebSocketEngine
import WebSocketTransport
import XCTest

/// The relay between a WebSocket connection and a byte stream, without the CLI: a client
/// driver (the WebSocket peer) ⇄ a server driver whose delegate is the `StreamRelay` ⇄ the
/// relay's stream ⇄ the target's end, read and written here with plain system calls.
final class StreamRelayTests: XCTestCase {
    var loop: EventLoop!

    override func setUpWithError() throws {
        signal(SIGPIPE, SIG_IGN)  // a target end written after the relay closed: EPIPE, not death
        loop = try EventLoop()
    }

    @discardableResult
    func spin(_ seconds: Double = 5, until done: () -> Bool) -> Bool { loop.spin(seconds, until: done) }

    struct Rig {
        let client: ConnectionDriver
        let clientLog: Recorder
        let server: ConnectionDriver
        let relay: StreamRelay
        /// The target's end of the relay's stream (non-blocking).
        let target: Int32
        let outcome: Box<RelayOutcome?>
    }

    final class Box<T> { var value: T; init(_ value: T) { self.value = value } }

    /// The relay's stream: a Unix socketpair, or (`tcp`) a loopback TCP connection dialled
    /// with `TargetDial`, so that a reset is a real RST.
    func rig(options: RelayOptions = .init(), serverOptions: ConnectionOptions = .init(), tcp: Bool = false) throws -> Rig {
        let (a, b) = streamPair()
        let stream: ByteStream
        let target: Int32
        if tcp {
            let listener = try LoopbackSocket(listening: true)
            var dialled: Result<TCPStream, TargetDial.Failure>?
            let dial = TargetDial(loop: loop, target: .tcp(HostPort(host: "127.0.0.1", port: UInt16(listener.port))), timeout: 3) {
                dialled = $0
            }
            dial.start()
            XCTAssertTrue(spin { dialled != nil })
            stream = try XCTUnwrap(try? dialled?.get())
            target = accept(listener.fd, nil, nil)
            XCTAssertGreaterThanOrEqual(target, 0)
            _ = fcntl(target, F_SETFL, fcntl(target, F_GETFL) | O_NONBLOCK)
        } else {
            var fds: [Int32] = [-1, -1]
            precondition(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0, &fds) == 0)
            stream = TCPStream(adopting: fds[0], remoteAddress: "target")
            target = fds[1]
        }
        let relay = StreamRelay(loop: loop, stream: stream, options: options)
        let outcome = Box<RelayOutcome?>(nil)
        relay.onEnd = { outcome.value = $0 }
        let clientLog = Recorder()
        let client = ConnectionDriver(loop: loop, stream: a, core: WebSocketConnection(role: .client), delegate: clientLog)
        let server = ConnectionDriver(loop: loop, stream: b, core: WebSocketConnection(role: .server), options: serverOptions,
                                      delegate: relay)
        client.start()
        relay.start(server)
        return Rig(client: client, clientLog: clientLog, server: server, relay: relay, target: target, outcome: outcome)
    }

    /// Reads what the target's end has now.
    func drain(_ fd: Int32, into bytes: inout [UInt8]) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = read(fd, &chunk, chunk.count)
            if n > 0 { bytes += chunk[..<n]; continue }
            return n == 0  // true at EOF
        }
    }

    func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
        var offset = 0
        let deadline = Instant.now().adding(seconds: 5)
        while offset < bytes.count && Instant.now() < deadline {
            let n = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n > 0 { offset += n } else { spin(0.01) { false } }
        }
        XCTAssertEqual(offset, bytes.count)
    }

    func received(_ log: Recorder) -> [UInt8] { log.messages.flatMap(\.bytes) }

    func pattern(_ count: Int, _ seed: Int = 7) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 &* seed &+ $0 >> 11) } }

    func testBytesGoBothWaysAndEachStreamReadIsOneBinaryMessage() throws {
        let rig = try rig()
        defer { close(rig.target) }
        let up = pattern(300_000)
        rig.client.send(.binary, bytes: up)
        rig.client.send(.text, bytes: Array("text é".utf8))
        var atTarget: [UInt8] = []
        XCTAssertTrue(spin { _ = drain(rig.target, into: &atTarget); return atTarget.count == up.count + 7 })
        XCTAssertEqual(atTarget, up + Array("text é".utf8), "binary and text payloads reach the target as their bytes, in order")

        let down = pattern(200_000, 13)
        writeAll(rig.target, down)
        XCTAssertTrue(spin { received(rig.clientLog).count == down.count })
        XCTAssertEqual(received(rig.clientLog), down)
        XCTAssertTrue(rig.clientLog.messages.allSatisfy { $0.kind == .binary && $0.bytes.count <= 64 * 1024 })
        XCTAssertEqual(rig.relay.bytesToStream, UInt64(up.count + 7))
        XCTAssertEqual(rig.relay.bytesFromStream, UInt64(down.count))
    }

    /// The target's EOF with data in flight: every byte before it, then Close 1000.
    func testTargetEndOfStreamClosesWith1000AfterEveryByteBeforeIt() throws {
        let rig = try rig()
        defer { close(rig.target) }
        let down = pattern(500_000)
        writeAll(rig.target, down)
        shutdown(rig.target, Int32(SHUT_WR))
        XCTAssertTrue(spin { rig.clientLog.ending != nil && rig.outcome.value != nil })
        XCTAssertEqual(received(rig.clientLog), down)
        XCTAssertEqual(rig.clientLog.closes.first?.code, .normalClosure)
        XCTAssertEqual(rig.outcome.value?.stream, .endOfStream)
        XCTAssertEqual(rig.outcome.value?.closeSent?.code, .normalClosure)
    }

    /// A reset (RST) after some bytes: they arrive, then Close 1014.
    func testTargetResetClosesWith1014AfterTheBytesBeforeIt() throws {
        let rig = try rig(tcp: true)
        writeAll(rig.target, pattern(1000))
        XCTAssertTrue(spin { received(rig.clientLog).count == 1000 })
        var linger = linger(l_onoff: 1, l_linger: 0)
        setsockopt(rig.target, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<linger>.size))
        close(rig.target)
        XCTAssertTrue(spin { rig.clientLog.ending != nil && rig.outcome.value != nil })
        XCTAssertEqual(received(rig.clientLog), pattern(1000))
        XCTAssertEqual(rig.clientLog.closes.first?.code, CloseCode(1014))
        guard case .failed = rig.outcome.value?.stream else { return XCTFail("\(String(describing: rig.outcome.value))") }
    }

    /// The peer's Close: what it sent reaches the target, then the target's EOF (our FIN);
    /// the target's reply after that still reaches the peer, and its EOF brings the answer.
    func testPeersCloseShutsDownTheStreamAndTheTargetsLastWordsStillArrive() throws {
        let rig = try rig()
        defer { close(rig.target) }
        rig.client.send(.binary, bytes: Array("request".utf8))
        rig.client.close(ClosePayload(code: .normalClosure))
        var atTarget: [UInt8] = []
        XCTAssertTrue(spin { drain(rig.target, into: &atTarget) }, "the target gets EOF after the request")
        XCTAssertEqual(atTarget, Array("request".utf8))
        XCTAssertNil(rig.clientLog.ending, "the answer waits for the target")
        writeAll(rig.target, Array("reply".utf8))
        shutdown(rig.target, Int32(SHUT_WR))
        XCTAssertTrue(spin { rig.clientLog.ending != nil && rig.outcome.value != nil })
        XCTAssertEqual(received(rig.clientLog), Array("reply".utf8))
        XCTAssertEqual(rig.clientLog.closes.first?.code, .normalClosure)
        XCTAssertEqual(rig.outcome.value?.stream, .endOfStream)
        if case .closed(let handshake) = rig.clientLog.ending { XCTAssertTrue(handshake.initiatedByUs) } else { XCTFail() }
    }

    /// A target that never ends after the peer's Close: the grace bounds the wait.
    func testTheGraceBoundsTheWaitForATargetThatDoesNotEnd() throws {
        var options = RelayOptions()
        options.closeGrace = 0.3
        let rig = try rig(options: options)
        defer { close(rig.target) }
        let start = Instant.now()
        rig.client.close(ClosePayload(code: .normalClosure))
        XCTAssertTrue(spin { rig.clientLog.ending != nil && rig.outcome.value != nil })
        let waited = Instant.now().seconds(since: start)
        XCTAssertGreaterThanOrEqual(waited, 0.25)
        XCTAssertLessThan(waited, 3)
        XCTAssertEqual(rig.clientLog.closes.first?.code, .normalClosure)
        XCTAssertEqual(rig.outcome.value?.stream, .graceExpired)
    }

    /// A target that does not read: the relay holds at most its bound, the peer's sends
    /// wait in its own queue; once the target reads, every byte arrives in order.
    func testATargetThatDoesNotReadStopsReadingTheWebSocket() throws {
        let rig = try rig()
        defer { close(rig.target) }
        let up = pattern(8 << 20)
        for offset in stride(from: 0, to: up.count, by: 1 << 20) { rig.client.send(.binary, bytes: Array(up[offset..<offset + (1 << 20)])) }
        spin(1) { false }
        let options = RelayOptions()
        XCTAssertLessThanOrEqual(rig.relay.queuedForStream, options.streamQueueLimit + ConnectionOptions().receiveBufferSize)
        XCTAssertTrue(rig.server.pausesReading)
        XCTAssertGreaterThan(rig.client.queuedBytes, 4 << 20, "the rest waits at the sender")
        var atTarget: [UInt8] = []
        XCTAssertTrue(spin(20) { _ = drain(rig.target, into: &atTarget); return atTarget.count >= up.count })
        XCTAssertEqual(atTarget, up)
    }

    /// A peer that does not read: the stream is read only while the driver's queue has room.
    func testAPeerThatDoesNotReadStopsReadingTheStream() throws {
        let rig = try rig()
        defer { close(rig.target) }
        rig.client.pauseReading()
        let chunk = [UInt8](repeating: 0x5A, count: 65536)
        var written = 0
        let deadline = Instant.now().adding(seconds: 3)
        while Instant.now() < deadline && written < 64 << 20 {
            let n = chunk.withUnsafeBytes { write(rig.target, $0.baseAddress, $0.count) }
            if n > 0 { written += n } else { spin(0.01) { false } }
        }
        XCTAssertLessThan(written, 16 << 20, "the target is stopped: kernel buffers and the relay's bound, no more")
        // The limit and one read, which may wait unframed as one entry (`MessageQueue.entryCost`).
        XCTAssertLessThanOrEqual(rig.server.queuedBytes, ConnectionOptions().queueLimit + RelayOptions().chunkSize + MessageQueue.entryCost)
        rig.client.resumeReading()
        XCTAssertTrue(spin(20) { received(rig.clientLog).count == Int(rig.relay.bytesFromStream) && rig.relay.bytesFromStream > 0 })
    }

    /// The peer lost: what it sent before reaches the target, then the target's EOF.
    func testAPeerLostStillDeliversWhatItSentThenEndsTheStream() throws {
        let rig = try rig()
        defer { close(rig.target) }
        rig.client.send(.binary, bytes: Array("last words".utf8))
        XCTAssertTrue(spin { rig.relay.bytesToStream == 10 })
        rig.client.abandon()
        var atTarget: [UInt8] = []
        XCTAssertTrue(spin { drain(rig.target, into: &atTarget) })
        XCTAssertEqual(atTarget, Array("last words".utf8))
        XCTAssertTrue(spin { rig.outcome.value != nil })
        XCTAssertEqual(rig.outcome.value?.stream, .closedByRelay)
    }

    func testDialFailuresSayRefusedOrTimedOut() throws {
        let bound = try LoopbackSocket(listening: false)
        var result: Result<TCPStream, TargetDial.Failure>?
        TargetDial(loop: loop, target: .tcp(HostPort(host: "127.0.0.1", port: UInt16(bound.port))), timeout: 3) { result = $0 }.start()
        XCTAssertTrue(spin { result != nil })
        guard case .failure(let failure) = result, case .refused(let code, _) = failure else { return XCTFail("\(String(describing: result))") }
        XCTAssertEqual(code, ECONNREFUSED)
        XCTAssertEqual(failure.status, 502)

        result = nil
        TargetDial(loop: loop, target: .unix(path: "/nonexistent/wspipe.sock"), timeout: 3) { result = $0 }.start()
        XCTAssertTrue(spin { result != nil })
        guard case .failure(let unixFailure) = result else { return XCTFail() }
        XCTAssertEqual(unixFailure.status, 502)

        // 192.0.2.1 (TEST-NET-1) is not routed: the SYN goes nowhere, or the network is
        // unreachable at once (502); either way no answer comes.
        result = nil
        let start = Instant.now()
        TargetDial(loop: loop, target: .tcp(HostPort(host: "192.0.2.1", port: 9)), timeout: 0.3) { result = $0 }.start()
        XCTAssertTrue(spin { result != nil })
        XCTAssertLessThan(Instant.now().seconds(since: start), 2)
        guard case .failure(let far) = result else { return XCTFail() }
        if case .timedOut = far { XCTAssertEqual(far.status, 504) } else { XCTAssertEqual(far.status, 502) }
    }

    func testADialNobodyAnswersTimesOutAs504() throws {
        let full = try FullBacklog()
        let port = UInt16(full.port)
        var result: Result<TCPStream, TargetDial.Failure>?
        let start = Instant.now()
        TargetDial(loop: loop, target: .tcp(HostPort(host: "127.0.0.1", port: port)), timeout: 0.5) { result = $0 }.start()
        XCTAssertTrue(spin { result != nil })
        let waited = Instant.now().seconds(since: start)
        guard case .failure(let failure) = result else { return XCTFail("\(String(describing: result))") }
        XCTAssertEqual(failure, .timedOut(seconds: 0.5))
        XCTAssertEqual(failure.status, 504)
        XCTAssertGreaterThanOrEqual(waited, 0.45)
        XCTAssertLessThan(waited, 3)
    }

    func testANameIsResolvedOffTheLoop() throws {
        let listener = try LoopbackSocket(listening: true)
        var result: Result<TCPStream, TargetDial.Failure>?
        TargetDial(loop: loop, target: .tcp(HostPort(host: "localhost", port: UInt16(listener.port))), timeout: 3) { result = $0 }.start()
        XCTAssertNil(result, "a name is looked up on a thread: nothing is decided before the loop turns")
        XCTAssertTrue(spin { result != nil })
        // localhost may resolve to ::1 first, where nobody listens: the next address is tried.
        XCTAssertNotNil(try? result?.get(), "\(String(describing: result))")
    }

    func testTargetsParse() {
        XCTAssertEqual(StreamTarget(parsing: "tcp:127.0.0.1:5900"), .tcp(HostPort(host: "127.0.0.1", port: 5900)))
        XCTAssertEqual(StreamTarget(parsing: "tcp:[::1]:22"), .tcp(HostPort(host: "::1", port: 22)))
        XCTAssertEqual(StreamTarget(parsing: "tcp:vnc.internal:5901"), .tcp(HostPort(host: "vnc.internal", port: 5901)))
        XCTAssertEqual(StreamTarget(parsing: "unix:/run/app.sock"), .unix(path: "/run/app.sock"))
        XCTAssertNil(StreamTarget(parsing: "tcp:host"))
        XCTAssertNil(StreamTarget(parsing: "127.0.0.1:5900"))
        XCTAssertNil(StreamTarget(parsing: "unix:"))
        XCTAssertNil(StreamTarget(parsing: "tcp:host:0"))
    }
}
