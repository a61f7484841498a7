import Glibc
import WebSocketEngine
import XCTest
@testable import WSPipeBridge

/// Which stdout kinds are watched for their reader leaving (`| head -n1` with a quiet
/// server): only the write end of an anonymous pipe, where the last reader leaving is final.
final class StdoutSinkTests: XCTestCase {
    func testOnlyTheWriteEndOfAnAnonymousPipeIsWatched() throws {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        defer { close(fds[0]); close(fds[1]) }
        XCTAssertTrue(StdoutSink(fd: fds[1]).readerLossIsVisible, "write end of a pipe")
        XCTAssertFalse(StdoutSink(fd: fds[0]).readerLossIsVisible, "a read end reports POLLHUP forever once the writer is gone")
    }

    func testANamedFIFOIsNotWatched() throws {
        // Readers of a FIFO come and go (`while :; do head -n1 < fifo; done`): POLLERR in the
        // gap between two of them does not mean nobody will read.
        let path = NSTemporaryDirectory() + "wspipe-fifo-\(getpid())"
        XCTAssertEqual(mkfifo(path, 0o600), 0)
        defer { unlink(path) }
        let fd = open(path, O_RDWR)  // O_RDWR: opening does not wait for a reader
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        XCTAssertFalse(StdoutSink(fd: fd).readerLossIsVisible)
    }

    func testFilesAndDevicesAreNotWatched() {
        let fd = open("/dev/null", O_WRONLY)
        defer { close(fd) }
        XCTAssertFalse(StdoutSink(fd: fd).readerLossIsVisible)
    }

    /// A batch submitted to an empty queue is taken whole (the lists swapped), one submitted
    /// behind bytes stdout has not taken goes after them; either way the batch is left empty.
    func testBatchesAreQueuedInOrderAndLeftEmpty() throws {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        defer { close(fds[0]); close(fds[1]) }
        _ = fcntl(fds[1], 1031, 4096)  // F_SETPIPE_SZ (not in Glibc's module): a page
        _ = fcntl(fds[0], F_SETFL, O_NONBLOCK)
        let sink = StdoutSink(fd: fds[1])
        func batch(_ byte: UInt8, _ count: Int) -> SegmentList {
            let buffer = ByteBuffer(capacity: count)
            buffer.base.initializeMemory(as: UInt8.self, repeating: byte, count: count)
            buffer.count = count
            var list = SegmentList()
            list.append(buffer, buffer.base, count)
            return list
        }
        var first = batch(0x61, 3 * 4096)
        sink.submit(&first)
        XCTAssertTrue(first.isEmpty)
        XCTAssertTrue(sink.flush(), "a full pipe: the rest waits")
        let waiting = sink.pendingBytes
        XCTAssertGreaterThan(waiting, 0)
        var second = batch(0x62, 100)
        sink.submit(&second)
        XCTAssertTrue(second.isEmpty)
        XCTAssertEqual(sink.pendingBytes, waiting + 100)
        var read: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        for _ in 0..<1000 where read.count < 3 * 4096 + 100 {
            let n = Glibc.read(fds[0], &chunk, chunk.count)
            if n > 0 { read += chunk[0..<n] }
            sink.flush()
        }
        XCTAssertEqual(read, [UInt8](repeating: 0x61, count: 3 * 4096) + [UInt8](repeating: 0x62, count: 100))
        XCTAssertEqual(sink.pendingBytes, 0)
    }
}
