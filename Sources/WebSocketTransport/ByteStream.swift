import Glibc

/// The outcome of one non-blocking read or write.
public enum IOResult: Equatable, Sendable {
    /// This many bytes were read or written (> 0).
    case done(Int)
    /// Nothing could be done now; wait until the descriptor is readable (`.read`) or
    /// writable (`.write`). TLS may need the other direction than the call's own.
    case wouldBlock(PollInterest)
    /// The peer closed its side (reads only).
    case endOfStream
    /// The connection failed.
    case failed(StreamFailure)
}

/// Why a read or write on an open stream failed.
public enum StreamFailure: Error, Equatable, Sendable, CustomStringConvertible {
    /// The system call failed with this errno (ECONNRESET, EPIPE...).
    case system(errno: Int32)
    /// The peer closed the connection where more was expected (in a write, mid-record).
    case closed
    /// The peer ended the TLS session (close_notify) where more was expected.
    case tlsSessionClosed
    /// TLS failed on the open stream: an alert or a broken record (`TLSAlert` says which).
    case tls(TLSAlert)
    /// Over a stream, the TLS layer's buffer toward OpenSSL is full.
    case tlsBufferFull

    public var description: String {
        switch self {
        case .system(let code): return errnoText(code)
        case .closed: return "connection closed"
        case .tlsSessionClosed: return "the server closed the TLS session"
        case .tls(let alert): return "TLS: \(alert)"
        case .tlsBufferFull: return "TLS: the tunnel's buffer is full"
        }
    }
}

/// Which readiness a blocked operation waits for.
public enum PollInterest: Equatable, Sendable {
    case read
    case write

    public var pollEvents: Int16 { self == .read ? Int16(POLLIN) : Int16(POLLOUT) }
}

/// A connected, non-blocking byte stream: plain TCP or TLS over TCP. One thread owns a
/// stream at a time (an OpenSSL `SSL*` is never shared between threads).
public protocol ByteStream: AnyObject {
    /// The socket, for poll(2).
    var fileDescriptor: Int32 { get }
    /// Reads up to `count` bytes into `buffer`.
    func read(into buffer: UnsafeMutableRawPointer, count: Int) -> IOResult
    /// Writes from the `count` buffers at `vectors` in order; returns how many bytes were
    /// taken. A TLS stream may take bytes into its own pending record (see
    /// `hasPendingOutput`); they count as written.
    func write(_ vectors: UnsafePointer<iovec>, count: Int) -> IOResult
    /// Bytes already received and decrypted but not yet read (TLS); poll(2) cannot see them.
    var hasBufferedInput: Bool { get }
    /// Output the stream accepted but has not handed to the kernel yet (TLS).
    var hasPendingOutput: Bool { get }
    /// Pushes pending output on; `.done(0)` when nothing remains.
    func flush() -> IOResult
    /// Ends our sending side (TLS close_notify, then TCP FIN); reading stays possible.
    func shutdownOutput()
    /// Releases the connection. Idempotent.
    func close()
}

// Blocking-style I/O on a non-blocking stream, within a deadline: the opening exchanges
// (proxy tunnels, the WebSocket handshake) use these; the session's loop never does.
extension ByteStream {
    /// Waits until an operation that returned `.wouldBlock(interest)` can go on, or the
    /// deadline passes. Returns at once for a read when input is already buffered (TLS).
    /// - Throws: `.timedOut(stage, seconds:)` at the deadline, `.system` when poll(2) fails.
    public func wait(for interest: PollInterest, until deadline: Deadline, stage: @autoclosure () -> Stage) throws(TransportError) {
        if interest == .read && hasBufferedInput { return }
        guard try deadline.wait(fd: fileDescriptor, events: interest.pollEvents) else {
            throw .timedOut(stage(), seconds: deadline.seconds)
        }
    }

    /// Writes all of `bytes`, then any output the stream still holds, before the deadline.
    /// - Returns: nil when everything is written, else how the stream failed (`.closed`
    ///   when it ended).
    /// - Throws: `.timedOut(stage, seconds:)` at the deadline, `.system` when poll(2) fails.
    public func writeAll(_ bytes: [UInt8], until deadline: Deadline,
                         stage: @autoclosure () -> Stage) throws(TransportError) -> StreamFailure? {
        var offset = 0
        while offset < bytes.count || hasPendingOutput {
            let result: IOResult
            if offset < bytes.count {
                result = bytes.withUnsafeBytes { raw -> IOResult in
                    guard let base = raw.baseAddress else { return .done(0) }
                    var vector = iovec(iov_base: UnsafeMutableRawPointer(mutating: base + offset), iov_len: raw.count - offset)
                    return write(&vector, count: 1)
                }
            } else {
                result = flush()
            }
            switch result {
            case .done(let n): offset += n
            case .wouldBlock(let interest): try wait(for: interest, until: deadline, stage: stage())
            case .endOfStream: return .closed
            case .failed(let failure): return failure
            }
        }
        return nil
    }
}
