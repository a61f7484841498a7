import Glibc
import WebSocketCore
import WebSocketTransport

/// One plain HTTP answer of the static site on the loop, without blocking: the head and a
/// small body, then a file's bytes (sendfile(2) on plain TCP, so they never pass through
/// our memory; on TLS, 16 KiB chunks read only when the stream took the last). Once all is
/// written, a kept-alive connection goes back to the server for its next request (with
/// the bytes the client pipelined behind this one), else it is shut and drained.
final class SiteExchange {
    private let loop: EventLoop
    private let connection: TCPStream
    /// The socket's peer or the PROXY header's client, for the connection's next request.
    private let connectionAddress: PeerAddress
    private let stream: ByteStream
    private weak var server: ServerDriver?
    private var answer: SiteAnswer
    /// Bytes the client sent after this request's head: the next requests, answered in order.
    private let pipelined: [UInt8]
    private var watch: EventLoop.Watch?
    private var timer: EventLoop.Timer?
    private var prefix: [UInt8]
    private var prefixWritten = 0
    /// TLS only: the chunk read from the file and how much of it the stream took.
    private var chunk: [UInt8] = []
    private var chunkWritten = 0
    private var lastProgress = Instant.now()

    /// A client that takes nothing for this long is dropped.
    static let stallLimit = 60.0
    static let chunkSize = 16 * 1024

    init(loop: EventLoop, connection: TCPStream, connectionAddress: PeerAddress, stream: ByteStream, server: ServerDriver,
         answer: SiteAnswer, pipelined: [UInt8]) {
        self.connectionAddress = connectionAddress
        self.loop = loop
        self.connection = connection
        self.stream = stream
        self.server = server
        self.answer = answer
        self.pipelined = pipelined
        prefix = answer.head + answer.body
    }

    /// What one round of writing achieved.
    enum Progress {
        /// All of the answer is out (the file is closed).
        case done
        /// The stream takes no more now; it waits for this.
        case blocked(IOEvents)
        /// The client left or a write failed (the file is closed).
        case failed
    }

    /// Writes what the stream takes now, without watching anything: a small answer usually
    /// goes out whole, and then the handshake exchange reads the next request on its own
    /// watch and timer (no epoll registration or timer of ours per request). `.blocked`:
    /// call `start()` to go on.
    func sendNow() -> Progress {
        let progress = push()
        if case .blocked = progress {} else { releaseFile() }
        return progress
    }

    /// Goes on writing under the loop: watches the stream and drops a stalled client.
    func start() {
        let watch = loop.watch(stream.fileDescriptor) { [weak self] _ in self?.send() }
        self.watch = watch
        let timer = loop.timer { [weak self] in self?.checkStall() }
        self.timer = timer
        loop.arm(timer, at: lastProgress.adding(seconds: SiteExchange.stallLimit))
        send()
    }

    private func send() {
        switch push() {
        case .done: finish()
        case .blocked(let interest): if let watch { loop.setInterest(watch, interest) }
        case .failed: end()
        }
    }

    private func push() -> Progress {
        while true {
            let result: IOResult
            if prefixWritten < prefix.count {
                result = writePrefix()
            } else if let file = answer.file, file.count > 0 {
                result = stream is TCPStream ? sendFile(file) : sendChunk(file)
            } else if stream.hasPendingOutput {
                result = stream.flush()
                if case .done = result, !stream.hasPendingOutput { return .done }
            } else {
                return .done
            }
            switch result {
            case .done(let n):
                if n > 0 { lastProgress = Instant.now() }
            case .wouldBlock(let interest):
                return .blocked(interest == .read ? .readable : .writable)
            case .endOfStream, .failed:
                return .failed
            }
        }
    }

    private func writePrefix() -> IOResult {
        let more = answer.file != nil && stream is TCPStream
        return prefix.withUnsafeBytes { raw -> IOResult in
            guard let base = raw.baseAddress else { return .done(0) }
            if more {
                // MSG_MORE: the head and the file's first bytes leave in one segment.
                let n = Glibc.send(connection.fileDescriptor, base + prefixWritten, raw.count - prefixWritten,
                                   Int32(MSG_NOSIGNAL) | Int32(MSG_MORE))
                if n >= 0 { prefixWritten += n; return .done(n) }
                return errno == EAGAIN || errno == EINTR ? .wouldBlock(.write) : .failed(.system(errno: errno))
            }
            var vector = iovec(iov_base: UnsafeMutableRawPointer(mutating: base + prefixWritten), iov_len: raw.count - prefixWritten)
            let result = stream.write(&vector, count: 1)
            if case .done(let n) = result { prefixWritten += n }
            return result
        }
    }

    /// sendfile(2) from the file's offset; the process ignores SIGPIPE (the CLI does), as
    /// sendfile has no MSG_NOSIGNAL.
    private func sendFile(_ file: (descriptor: Int32, offset: UInt64, count: UInt64)) -> IOResult {
        var offset = off_t(file.offset)
        let n = Glibc.sendfile(connection.fileDescriptor, file.descriptor, &offset, Int(min(file.count, 1 << 30)))
        if n > 0 {
            answer.file = (file.descriptor, UInt64(offset), file.count - UInt64(n))
            return .done(n)
        }
        if n == 0 { return .failed(.system(errno: EIO)) }  // the file shrank under us
        let code = errno
        if code == EAGAIN || code == EINTR { return .wouldBlock(.write) }
        return .failed(.system(errno: code))
    }

    private func sendChunk(_ file: (descriptor: Int32, offset: UInt64, count: UInt64)) -> IOResult {
        if chunkWritten == chunk.count {
            let size = Int(min(UInt64(SiteExchange.chunkSize), file.count))
            if chunk.count != size { chunk = [UInt8](repeating: 0, count: size) }
            let n = chunk.withUnsafeMutableBytes { pread(file.descriptor, $0.baseAddress, size, off_t(file.offset)) }
            guard n > 0 else { return .failed(.system(errno: n == 0 ? EIO : errno)) }
            if n < size { chunk.removeLast(size - n) }
            chunkWritten = 0
        }
        let result = chunk.withUnsafeBytes { raw -> IOResult in
            var vector = iovec(iov_base: UnsafeMutableRawPointer(mutating: raw.baseAddress! + chunkWritten), iov_len: raw.count - chunkWritten)
            return stream.write(&vector, count: 1)
        }
        if case .done(let n) = result {
            chunkWritten += n
            answer.file = (file.descriptor, file.offset + UInt64(n), file.count - UInt64(n))
        }
        return result
    }

    private func checkStall() {
        let due = lastProgress.adding(seconds: SiteExchange.stallLimit)
        if Instant.now() >= due { return end() }
        if let timer { loop.arm(timer, at: due) }
    }

    private func releaseFile() {
        if let file = answer.file { close(file.descriptor) }
        answer.file = nil
        chunk = []
    }

    private func stopWatching() {
        if let watch { loop.remove(watch) }
        if let timer { loop.arm(timer, at: nil) }
        watch = nil
        timer = nil
    }

    /// Everything is written: the next request, or the end of the connection.
    private func finish() {
        releaseFile()
        stopWatching()
        guard let server else { return stream.close() }
        server.siteExchangeEnded(self)
        server.resumeHandshake(connection: connection, stream: stream, connectionAddress: connectionAddress, received: pipelined, closing: !answer.keepAlive)
    }

    /// The client left, a write failed, it stalled, or the server shut down.
    func end() {
        releaseFile()
        stopWatching()
        stream.close()
        server?.siteExchangeEnded(self)
    }
}
