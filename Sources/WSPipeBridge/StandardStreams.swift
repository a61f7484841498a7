import CWSPipeShims
import Glibc
import WebSocketEngine

/// How a standard descriptor can be used without blocking the (only) network thread and
/// without setting O_NONBLOCK on it: that flag belongs to the open file description, which
/// the shell and other processes on the same terminal or pipe share.
enum StreamKind {
    /// Reads and writes complete at once (page cache); always ready.
    case regular
    /// Pipes and FIFOs: per-call RWF_NOWAIT (preadv2/pwritev2).
    case pipe
    /// Sockets: per-call MSG_DONTWAIT.
    case socket
    /// Terminals and other character devices (/dev/null): read after poll(2) says so;
    /// writes are plain (a terminal whose output is stopped with ^S pauses the session).
    case device

    init(fd: Int32) {
        switch wsp_fd_kind(fd) {
        case Int32(WSP_FD_REGULAR): self = .regular
        case Int32(WSP_FD_PIPE): self = .pipe
        case Int32(WSP_FD_SOCKET): self = .socket
        default: self = .device
        }
    }
}

/// stdin, read by the network thread when poll(2) says so (regular files: whenever there
/// is room), never blocking: a pipe is read with RWF_NOWAIT, a socket with MSG_DONTWAIT.
final class StdinSource {
    enum Read {
        case data(Int)
        case wouldBlock
        case end
        case failed(String)
    }

    let fd: Int32
    let kind: StreamKind
    /// False once RWF_NOWAIT turned out unsupported (old kernel): reads then rely on
    /// poll(2) alone, as for terminals.
    private var nowait = true

    init(fd: Int32 = 0) {
        self.fd = fd
        kind = StreamKind(fd: fd)
    }

    /// Regular files never wait; everything else is polled for POLLIN.
    var needsPoll: Bool { kind != .regular }

    /// Whether, after a successful read, another read may still be tried without poll(2):
    /// only where a read that finds nothing returns EAGAIN instead of blocking.
    var readsUntilWouldBlock: Bool {
        switch kind {
        case .regular, .socket: return true
        case .pipe: return nowait
        case .device: return false
        }
    }

    /// Whether stdin is known to be at its end, found without taking a byte: a pipe whose
    /// writers have all gone and that holds nothing, a regular file read to its size, a
    /// socket whose peer has shut its side. A terminal or another device is never known
    /// to be (false).
    var isUsedUp: Bool {
        switch kind {
        case .pipe:
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 0) == 1 else { return false }
            return entry.revents & Int16(POLLHUP) != 0 && entry.revents & Int16(POLLIN) == 0
        case .regular:
            var status = stat()
            guard fstat(fd, &status) == 0 else { return false }
            let offset = lseek(fd, 0, SEEK_CUR)
            return offset >= 0 && offset >= status.st_size
        case .socket:
            var byte: UInt8 = 0
            return recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) == 0
        case .device:
            return false
        }
    }

    func read(into buffer: UnsafeMutableRawPointer, count: Int) -> Read {
        while true {
            let n: Int
            switch kind {
            case .pipe where nowait:
                var vector = iovec(iov_base: buffer, iov_len: count)
                n = wsp_readv_nowait(fd, &vector, 1)
            case .socket:
                n = recv(fd, buffer, count, Int32(MSG_DONTWAIT))
            default:
                n = Glibc.read(fd, buffer, count)
            }
            if n > 0 { return .data(n) }
            if n == 0 { return .end }
            let code = errno
            switch code {
            case EINTR: continue
            case EAGAIN: return .wouldBlock
            case EOPNOTSUPP, EINVAL:
                guard kind == .pipe && nowait else { return .failed("cannot read stdin: \(String(cString: strerror(code)))") }
                nowait = false  // no RWF_NOWAIT here: read after poll(2) from now on
                return .wouldBlock
            case EBADF: return .end
            default: return .failed("cannot read stdin: \(String(cString: strerror(code)))")
            }
        }
    }
}

/// stdout, written by the network thread without ever waiting on a slow reader: complete
/// messages queue here (as references into the receive buffers) and go out with writev
/// as the descriptor takes them; a pipe is written with RWF_NOWAIT, a socket with
/// MSG_DONTWAIT. The session stops reading the socket while too much waits here.
final class StdoutSink {
    enum Failure: Equatable {
        /// The reader went away (EPIPE): not an error for a pipeline like `| head -n1`.
        case readerGone
        case failed(String)
    }

    let fd: Int32
    let kind: StreamKind
    private var queue = SegmentList()
    private(set) var failure: Failure?
    private var nowait = true
    private let vectors = UnsafeMutableBufferPointer<iovec>.allocate(capacity: 1024)

    /// Whether poll(2) can tell us the reader is gone: only for an anonymous pipe open for
    /// writing. Its last reader leaving is final; a named FIFO may get a new reader a moment
    /// later (so POLLERR there is not "gone"), and a read end reports POLLHUP forever.
    private(set) var readerLossIsVisible: Bool

    init(fd: Int32 = 1) {
        self.fd = fd
        kind = StreamKind(fd: fd)
        readerLossIsVisible = false
        if kind == .pipe {
            let mode = wsp_get_fl(fd)
            let writable = mode >= 0 && (mode & O_ACCMODE == O_WRONLY || mode & O_ACCMODE == O_RDWR)
            readerLossIsVisible = writable && StdoutSink.isAnonymousPipe(fd)
        }
    }

    deinit { vectors.deallocate() }

    /// /proc/self/fd/N of an anonymous pipe reads "pipe:[inode]"; of a FIFO, its path.
    private static func isAnonymousPipe(_ fd: Int32) -> Bool {
        var target = [CChar](repeating: 0, count: 64)
        let n = readlink("/proc/self/fd/\(fd)", &target, target.count - 1)
        guard n > 0 else { return false }
        return String(decoding: target[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self).hasPrefix("pipe:")
    }

    /// poll(2) reported something other than POLLERR on the idle pipe: stop watching it.
    func stopWatchingReader() { readerLossIsVisible = false }

    /// Bytes queued and not yet written.
    var pendingBytes: Int { queue.byteCount }

    /// Queues `batch`'s segments and leaves it empty. Into an empty queue (stdout keeps up:
    /// the usual case) the two lists are swapped, so the writer's next batch starts with the
    /// queue's array, capacity kept: no append per segment and no array grown anew per read.
    func submit(_ batch: inout SegmentList) {
        if batch.isEmpty { return }
        if failure != nil {
            batch.removeAll()
        } else if queue.isEmpty {
            swap(&queue, &batch)
        } else {
            queue.append(contentsOf: batch)
            batch.removeAll()
        }
    }

    /// Writes what the descriptor takes now. Returns true when it would block (poll for
    /// POLLOUT), false when everything is written or writing failed.
    @discardableResult
    func flush() -> Bool {
        while !queue.isEmpty && failure == nil {
            let count = queue.fill(vectors)
            let n: Int
            switch kind {
            case .pipe where nowait:
                n = wsp_writev_nowait(fd, vectors.baseAddress, Int32(count))
            case .socket:
                var message = msghdr()
                message.msg_iov = vectors.baseAddress
                message.msg_iovlen = count
                n = sendmsg(fd, &message, Int32(MSG_DONTWAIT) | Int32(MSG_NOSIGNAL))
            case .pipe:
                // No RWF_NOWAIT (old kernel): poll(2) said writable, which for a pipe means
                // room for at least one page; a write of at most that much does not block.
                vectors[0].iov_len = min(vectors[0].iov_len, 4096)
                n = Glibc.writev(fd, vectors.baseAddress, 1)
            default:
                n = Glibc.writev(fd, vectors.baseAddress, Int32(count))
            }
            if n >= 0 {
                queue.consume(n)
                if kind == .pipe && !nowait { return !queue.isEmpty }
                continue
            }
            let code = errno
            switch code {
            case EINTR: continue
            case EAGAIN: return true
            case EOPNOTSUPP where kind == .pipe && nowait, EINVAL where kind == .pipe && nowait:
                nowait = false  // no RWF_NOWAIT here: write after poll(2) from now on
                return true
            case EOPNOTSUPP, EINVAL:
                fail(.failed("cannot write to stdout: \(String(cString: strerror(code)))"))
            case EPIPE: fail(.readerGone)
            case EBADF: fail(.failed("cannot write to stdout: it is closed"))
            default: fail(.failed("cannot write to stdout: \(String(cString: strerror(code)))"))
            }
        }
        return false
    }

    /// Writes everything left, waiting as long as the reader needs (the session's end).
    func drain() {
        while flush() {
            var entry = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            _ = poll(&entry, 1, -1)
        }
    }

    /// poll(2) reported the pipe's last reader gone while nothing was being written.
    func readerWentAway() {
        if failure == nil { fail(.readerGone) }
    }

    private func fail(_ reason: Failure) {
        failure = reason
        queue.removeAll()
    }
}
