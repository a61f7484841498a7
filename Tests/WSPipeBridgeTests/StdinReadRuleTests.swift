// The stdio endpoint's short-read rule, per kind of stdin (StdinSource.waitsAfter): after
// a read shorter than asked, a pipe, a socket and a terminal hold nothing more (wait for
// poll), a regular file is read again at once (its end follows; nothing would wake it).
// The client and --broadcast disagreed before for a socket (the broadcast read it again).
import Glibc
import XCTest
@testable import WSPipeBridge

final class StdinReadRuleTests: XCTestCase {
    private var opened: [Int32] = []

    override func tearDown() {
        for fd in opened { close(fd) }
        opened = []
    }

    private func keep(_ fds: Int32...) { opened += fds }

    /// The rule for a descriptor: its kind, and whether a short and a full read wait.
    private func rule(_ fd: Int32) -> (kind: StreamKind, short: Bool, full: Bool) {
        let source = StdinSource(fd: fd)
        return (source.kind, source.waitsAfter(reading: 10, of: 65536), source.waitsAfter(reading: 65536, of: 65536))
    }

    func testAShortReadOfAPipeWaitsAndAFullOneReadsAgain() {
        var fds: [Int32] = [-1, -1]
        XCTAssertEqual(pipe(&fds), 0)
        keep(fds[0], fds[1])
        let (kind, short, full) = rule(fds[0])
        XCTAssertEqual(kind, .pipe)
        XCTAssertTrue(short, "a short read emptied the pipe")
        XCTAssertFalse(full, "a full read may have left more: RWF_NOWAIT reads again without blocking")
    }

    func testAShortReadOfASocketWaitsAndAFullOneReadsAgain() {
        var fds: [Int32] = [-1, -1]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds), 0)
        keep(fds[0], fds[1])
        let (kind, short, full) = rule(fds[0])
        XCTAssertEqual(kind, .socket)
        XCTAssertTrue(short, "recv took everything queued: another read would meet EAGAIN")
        XCTAssertFalse(full)
        // What the rule rests on: a read asking for more than is queued gets all of it.
        let written = Array(repeating: UInt8(ascii: "x"), count: 3000)
        XCTAssertEqual(written.withUnsafeBytes { write(fds[1], $0.baseAddress, 1000) }, 1000)
        XCTAssertEqual(written.withUnsafeBytes { write(fds[1], $0.baseAddress! + 1000, 2000) }, 2000)
        var buffer = [UInt8](repeating: 0, count: 65536)
        guard case .data(let n) = buffer.withUnsafeMutableBytes({ StdinSource(fd: fds[0]).read(into: $0.baseAddress!, count: $0.count) }) else {
            return XCTFail("no data")
        }
        XCTAssertEqual(n, 3000, "both writes in one read")
        guard case .wouldBlock = buffer.withUnsafeMutableBytes({ StdinSource(fd: fds[0]).read(into: $0.baseAddress!, count: $0.count) }) else {
            return XCTFail("the short read had emptied it")
        }
    }

    func testAShortReadOfARegularFileReadsAgainForItsEnd() throws {
        let path = NSTemporaryDirectory() + "stdin-rule-\(getpid())"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data("abc".utf8)))
        defer { unlink(path) }
        let fd = open(path, O_RDONLY)
        XCTAssertGreaterThanOrEqual(fd, 0)
        keep(fd)
        let (kind, short, full) = rule(fd)
        XCTAssertEqual(kind, .regular)
        XCTAssertFalse(short, "epoll cannot watch a file: waiting would never end")
        XCTAssertFalse(full)
    }

    func testATerminalAndDevNullAlwaysWaitForPoll() {
        // A pseudo-terminal (its master side: the same character-device kind as its slave).
        let terminal = open("/dev/ptmx", O_RDWR | O_NOCTTY)
        XCTAssertGreaterThanOrEqual(terminal, 0)
        keep(terminal)
        let null = open("/dev/null", O_RDONLY)
        keep(null)
        for fd in [terminal, null] {
            let (kind, short, full) = rule(fd)
            XCTAssertEqual(kind, .device)
            XCTAssertTrue(short, "a plain read of a terminal blocks when it holds nothing")
            XCTAssertTrue(full)
        }
    }
}
