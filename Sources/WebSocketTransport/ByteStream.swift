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
    /// The connection failed; the text says why ("Connection reset by peer").
    case failed(String)
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
