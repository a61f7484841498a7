import Glibc
import WebSocketCore
import WebSocketTransport

/// Settings of a WebSocket ⇄ byte stream relay.
public struct RelayOptions: Sendable, Equatable {
    /// Bytes read from the stream at a time: the largest binary message one read becomes.
    public var chunkSize = 64 * 1024
    /// WebSocket payload waiting for the stream beyond which the WebSocket is not read.
    public var streamQueueLimit = 256 * 1024
    /// Seconds the stream has, after the peer's Close (or the connection's end), to finish:
    /// to send what it still has up to its end of stream, or to take what waits for it.
    public var closeGrace = 1.0

    public init() {}

    /// The most payload a relay pair holds, both directions together (the man page's
    /// bound): toward the stream its queue plus one WebSocket read, toward the WebSocket the
    /// driver's queue plus one stream read.
    public func boundPerPair(_ connection: ConnectionOptions) -> Int {
        streamQueueLimit + connection.receiveBufferSize + connection.queueLimit + chunkSize
    }
}

/// How the stream side of a relay ended.
public enum RelayStreamEnd: Equatable, Sendable {
    /// The stream's peer closed its sending side (EOF); Close 1000 followed.
    case endOfStream
    /// A read or write failed (a reset); Close 1014 followed, if the connection was open.
    case failed(StreamFailure)
    /// The WebSocket connection ended first: what waited for the stream was written (within
    /// the grace) and the relay closed it.
    case closedByRelay
    /// The peer's Close came and the stream did not reach its end within the grace.
    case graceExpired
}

/// How one relay ended: the connection's ending, the stream's, the bytes each way.
public struct RelayOutcome: Equatable, Sendable {
    public let connection: ConnectionEnding
    public let stream: RelayStreamEnd
    /// Payload bytes written to the stream (from the WebSocket peer).
    public let bytesToStream: UInt64
    /// Bytes read from the stream and sent as binary messages.
    public let bytesFromStream: UInt64
    /// The Close we sent (nil when the connection was lost before one).
    public let closeSent: ClosePayload?
}

/// Carries one WebSocket connection (a `ConnectionDriver` of either role) to a byte stream
/// and back, on the driver's loop: each data message's payload is written to the stream as
/// it arrives (text like binary: its UTF-8 bytes, as websockify does; message boundaries
/// are not kept), and what each stream read gives (at most `chunkSize`) goes out as one
/// binary message.
///
/// Flow control both ways: at most `streamQueueLimit` (plus one WebSocket read) waits for
/// a stream that does not read, then the WebSocket is not read (`pauseReading`); the stream
/// is read only while the driver's queue is below its `queueLimit`. Nothing grows without
/// bound (`RelayOptions.boundPerPair`).
///
/// Endings (as `ExecBridge`'s for a program): the stream's EOF → everything read before
/// it, then Close 1000; a failed read or write (a reset) → what was read before, then
/// Close 1014 "target reset the connection"; the peer's Close → what it sent before is
/// written, the stream's sending side is shut down (FIN), what the stream still sends is
/// relayed until its EOF (then Close 1000 answers) or the grace passes (1000 answers, the
/// stream is closed). The connection lost → what waits is written within the grace, then
/// the stream is closed. While the relay is idle it holds no buffer.
public final class StreamRelay: ConnectionDelegate {
    public let loop: EventLoop
    public let stream: ByteStream
    public let options: RelayOptions
    /// When both the connection and the stream are over (once).
    public var onEnd: (RelayOutcome) -> Void = { _ in }
    public private(set) var bytesToStream: UInt64 = 0
    public private(set) var bytesFromStream: UInt64 = 0

    private var driver: ConnectionDriver?
    private var watch: EventLoop.Watch?
    private var toStream = SegmentList()
    private var readBuffer: ByteBuffer?
    private var readWaits: PollInterest?
    private var writeWaits: PollInterest?
    /// The stream's EOF was read.
    private var streamEnded = false
    private var streamEnd: RelayStreamEnd?
    private var outputShutDown = false
    private var streamClosed = false
    /// Nothing more comes from the peer (its Close, or the connection is over).
    private var peerDone = false
    /// The peer's Close waits for our answer.
    private var owesAnswer = false
    private var graceTimer: EventLoop.Timer?
    private var closeSent: ClosePayload?
    private var ending: ConnectionEnding?
    private var keepAlive: StreamRelay?

    /// Payload held for the stream up to this size is copied out of a receive buffer the
    /// driver lets go (an idle peer's few bytes must not pin a 256 KiB buffer each).
    static let compactLimit = 64 * 1024

    public init(loop: EventLoop, stream: ByteStream, options: RelayOptions = .init()) {
        self.loop = loop
        self.stream = stream
        self.options = options
    }

    /// Starts `driver` (made with this relay as its delegate) and the stream.
    public func start(_ driver: ConnectionDriver) {
        attach(driver)
        driver.start()
    }

    /// Starts the stream for `driver`, whose owner starts it (a server hands the driver
    /// over after the 101). Call before the driver starts: the relay answers the peer's
    /// Close itself (`answersCloseItself`), after the stream's last bytes.
    public func attach(_ driver: ConnectionDriver) {
        guard keepAlive == nil else { return }
        keepAlive = self
        self.driver = driver
        driver.answersCloseItself = true
        watch = loop.watch(stream.fileDescriptor) { [weak self] events in self?.handle(events) }
        readStream()
    }

    /// Payload bytes waiting for the stream.
    public var queuedForStream: Int { toStream.byteCount }

    // MARK: - WebSocket → stream

    public func connection(_ connection: ConnectionDriver, didStartMessage kind: MessageKind) {}

    public func connection(_ connection: ConnectionDriver, didReceive bytes: UnsafeMutableRawPointer, count: Int, in buffer: ByteBuffer) {
        guard streamEnd == nil || streamEnd == .endOfStream, !streamClosed else { return }
        toStream.append(buffer, bytes, count)
    }

    public func connectionDidEndMessage(_ connection: ConnectionDriver) {}

    public func connectionDidProcessInput(_ connection: ConnectionDriver) { writeStream() }

    public func connectionWillReleaseReceiveBuffer(_ connection: ConnectionDriver) {
        guard !toStream.isEmpty, toStream.byteCount <= StreamRelay.compactLimit else { return }
        let copy = ByteBuffer(capacity: toStream.byteCount)
        var pieces = toStream
        let vectors = loop.vectors
        while !pieces.isEmpty {
            let n = pieces.fill(vectors)
            var taken = 0
            for vector in vectors[0..<n] {
                copy.end.copyMemory(from: vector.iov_base!, byteCount: vector.iov_len)
                copy.count += vector.iov_len
                taken += vector.iov_len
            }
            pieces.consume(taken)
        }
        toStream.removeAll()
        toStream.append(copy, copy.base, copy.count)
    }

    private func writeStream() {
        guard !streamClosed else { return }
        let vectors = UnsafeMutableBufferPointer(rebasing: loop.vectors[0..<64])
        writeWaits = nil
        while !toStream.isEmpty {
            let count = toStream.fill(vectors)
            switch stream.write(UnsafePointer(vectors.baseAddress!), count: count) {
            case .done(let n):
                toStream.consume(n)
                bytesToStream &+= UInt64(n)
            case .wouldBlock(let interest):
                writeWaits = interest
                updateInterest()
                updatePause()
                return
            case .endOfStream:
                return streamFailed(.closed)
            case .failed(let failure):
                return streamFailed(failure)
            }
        }
        updateInterest()
        updatePause()
        guard peerDone else { return }
        if ending != nil { return closeStream(.closedByRelay) }
        if !outputShutDown {
            outputShutDown = true
            stream.shutdownOutput()
        }
    }

    private func updatePause() {
        guard let driver else { return }
        if toStream.byteCount >= options.streamQueueLimit { driver.pauseReading() } else { driver.resumeReading() }
    }

    // MARK: - Stream → WebSocket

    public func connectionHasRoom(_ connection: ConnectionDriver) { readStream() }

    private var peerHasRoom: Bool {
        guard let driver, driver.canSendData || owesAnswer && driver.state == .closeReceived else { return false }
        return driver.queuedBytes < driver.options.queueLimit
    }

    private func readStream() {
        guard !streamEnded, !streamClosed, streamEnd == nil else { return }
        readWaits = nil
        var reads = 0
        while peerHasRoom, let driver {
            if reads == 16 {
                // Let the other descriptors have a turn; come back before the next wait.
                loop.later { [weak self] in self?.readStream() }
                break
            }
            reads += 1
            let buffer = bufferWithRoom()
            switch stream.read(into: buffer.end, count: min(buffer.free, options.chunkSize)) {
            case .done(let n):
                let start = buffer.end
                buffer.count += n
                bytesFromStream &+= UInt64(n)
                driver.send(.binary, fin: true, start, count: n, in: buffer)
            case .wouldBlock(let interest):
                readWaits = interest
                releaseIdleBuffer()
                updateInterest()
                return
            case .endOfStream:
                streamEnded = true
                streamEnd = .endOfStream
                releaseIdleBuffer()
                updateInterest()
                stopGrace()
                closeConnection(ClosePayload(code: .normalClosure))
                if ending != nil && toStream.isEmpty { closeStream(.endOfStream) }
                return
            case .failed(let failure):
                return streamFailed(failure)
            }
        }
        updateInterest()
    }

    /// A buffer with room for a read: the last one while it has a quarter of a chunk free,
    /// else it again if nothing else holds it, else a fresh one (from the pool).
    private func bufferWithRoom() -> ByteBuffer {
        if let buffer = readBuffer, buffer.free >= options.chunkSize / 4 { return buffer }
        if readBuffer != nil, isKnownUniquelyReferenced(&readBuffer!) {
            readBuffer!.count = 0
            return readBuffer!
        }
        let fresh = ByteBuffer(capacity: options.chunkSize)
        readBuffer = fresh
        return fresh
    }

    /// An idle relay holds no buffer: the driver's queue keeps what it still references.
    private func releaseIdleBuffer() { readBuffer = nil }

    // MARK: - The stream's descriptor

    private func handle(_ events: IOEvents) {
        let broken = events.contains(.error) || events.contains(.hangUp)
        if let interest = writeWaits, broken || events.contains(IOEvents(interest)) { writeStream() }
        if let interest = readWaits, broken || events.contains(IOEvents(interest)) { readStream() }
    }

    private func updateInterest() {
        guard let watch, !streamClosed else { return }
        var interest: IOEvents = []
        if let readWaits { interest.insert(IOEvents(readWaits)) }
        if let writeWaits { interest.insert(IOEvents(writeWaits)) }
        loop.setInterest(watch, interest)
    }

    // MARK: - Endings

    /// A read or write failed: what was read before goes, then Close 1014.
    private func streamFailed(_ failure: StreamFailure) {
        guard !streamClosed else { return }
        streamEnd = .failed(failure)
        toStream.removeAll()
        updatePause()
        closeConnection(ClosePayload(code: CloseCode(1014), reason: Array("target reset the connection".utf8)))
        closeStream(.failed(failure))
    }

    /// Our Close: the answer the peer's Close waits for, or the first one.
    private func closeConnection(_ payload: ClosePayload) {
        guard let driver, ending == nil else { return }
        if !owesAnswer && driver.closeSent != nil { return }
        owesAnswer = false
        closeSent = payload
        driver.close(payload)
    }

    /// The peer closed: what it sent before goes to the stream, then its FIN; the stream
    /// has the grace to send the rest and end.
    public func connection(_ connection: ConnectionDriver, didReceiveClose payload: ClosePayload) {
        guard connection.state == .closeReceived, !peerDone else { return }
        peerDone = true
        owesAnswer = true
        if streamEnd != nil {
            // The stream is over already (its Close was not sent yet): answer now.
            closeConnection(ClosePayload(code: streamEnd == .endOfStream ? .normalClosure : CloseCode(1014)))
            return
        }
        startGrace()
        writeStream()
    }

    public func connectionPeerShutDownWhilePaused(_ connection: ConnectionDriver) { startGrace() }

    public func connection(_ connection: ConnectionDriver, didEnd ending: ConnectionEnding) {
        self.ending = ending
        driver = nil
        peerDone = true
        owesAnswer = false
        if streamClosed { return finish() }
        if toStream.isEmpty || streamEnd != nil && streamEnd != .endOfStream {
            return closeStream(streamEnd ?? .closedByRelay)
        }
        startGrace()
        writeStream()
    }

    private func startGrace() {
        guard graceTimer == nil, !streamClosed else { return }
        let timer = loop.timer { [weak self] in self?.graceOver() }
        graceTimer = timer
        loop.arm(timer, at: Instant.now().adding(seconds: options.closeGrace))
    }

    private func stopGrace() {
        if let graceTimer { loop.arm(graceTimer, at: nil) }
        graceTimer = nil
    }

    /// The stream did not finish in time: the peer's Close is answered (1000) and the
    /// stream closed; a peer gone while its data waited for the stream gets no more.
    private func graceOver() {
        graceTimer = nil
        guard !streamClosed else { return }
        toStream.removeAll()
        if let driver, driver.pausesReading { driver.resumeReading() }
        let expired = ending == nil
        closeConnection(ClosePayload(code: .normalClosure))
        closeStream(expired ? .graceExpired : .closedByRelay)
    }

    private func closeStream(_ end: RelayStreamEnd) {
        guard !streamClosed else { return }
        streamClosed = true
        if streamEnd == nil { streamEnd = end }
        stopGrace()
        if let watch { loop.remove(watch) }
        watch = nil
        stream.close()
        toStream.removeAll()
        readBuffer = nil
        finish()
    }

    private func finish() {
        guard let ending, streamClosed, keepAlive != nil else { return }
        keepAlive = nil
        let done = onEnd
        onEnd = { _ in }
        done(RelayOutcome(connection: ending, stream: streamEnd ?? .closedByRelay, bytesToStream: bytesToStream,
                          bytesFromStream: bytesFromStream, closeSent: closeSent))
    }
}
