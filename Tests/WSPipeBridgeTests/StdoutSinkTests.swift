import Glibc
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
}
